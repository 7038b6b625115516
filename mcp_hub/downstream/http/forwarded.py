"""``X-Forwarded-*`` headers, believed only from the reverse proxies in ``[hub.http] trusted_proxies``.

Anyone can send ``X-Forwarded-Proto: https`` or ``X-Forwarded-Host: other``; only a
proxy the operator named may tell the hub how the client reached it. For a request
whose peer address is in ``trusted_proxies``, :class:`ForwardedHeaders` puts
``X-Forwarded-Proto`` into the scope's ``scheme``, ``X-Forwarded-Host`` under
:data:`~mcp_hub.auth.metadata.FORWARDED_HOST` and the client address of
``X-Forwarded-For`` (the nearest address that is not itself a trusted proxy) into
the scope's ``client``. From every other peer the headers are ignored: nothing
else in the hub reads them (uvicorn's own proxy-header handling is switched off).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.auth.metadata import FORWARDED_HOST

__all__ = ["ForwardedHeaders", "TrustedProxies"]

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    """The addresses and networks whose forwarding headers are believed."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.networks: list[_Network] = [ipaddress.ip_network(e, strict=False) for e in entries]

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        """True if ``address`` is one of the trusted proxies."""
        try:
            ip = ipaddress.ip_address(address.strip().strip("[]"))
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in net for net in self.networks)

    def client_of(self, forwarded_for: str, peer: str) -> str:
        """The client address behind a chain of proxies: the nearest untrusted hop."""
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        return hops[0] if hops else peer


def _first(value: str) -> str:
    return value.split(",")[0].strip()


class ForwardedHeaders:
    """Applies ``X-Forwarded-*`` of trusted proxies to the ASGI scope (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, trusted: Sequence[str]) -> None:
        self.app = app
        self.trusted = TrustedProxies(trusted)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.trusted:
            client = scope.get("client")
            if client and self.trusted.trusts(str(client[0])):
                self._apply(scope, client)
        await self.app(scope, receive, send)

    def _apply(self, scope: Scope, client: tuple[str, int]) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        proto = _first(headers.get("x-forwarded-proto", "")).lower()
        if proto in ("http", "https"):
            scope["scheme"] = proto
        host = _first(headers.get("x-forwarded-host", ""))
        if host:
            scope[FORWARDED_HOST] = host
        forwarded_for = headers.get("x-forwarded-for", "")
        if forwarded_for:
            scope["client"] = (self.trusted.client_of(forwarded_for, str(client[0])), 0)
