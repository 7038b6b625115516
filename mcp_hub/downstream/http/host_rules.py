"""Which Host and Origin values the HTTP hub accepts: one implementation for every route.

The pattern language is the SDK's ``TransportSecuritySettings``: an entry is an
exact value (``127.0.0.1:8765``, ``http://localhost:8765``) or ``NAME:*`` for
NAME on any port. Matching here is exact where the SDK's own check compares
prefixes: ``NAME:*`` admits only ``NAME:`` followed by a port number, so
``http://127.0.0.1:8765.evil.com`` is not ``http://127.0.0.1:*``. Host names
compare case-insensitively.

On top of the lists, an Origin equal to ``http(s)://`` plus the request's own
(accepted) Host is same-origin and allowed.

The guard middleware applies these rules to every request before any route
sees it, so the SDK transports get their DNS-rebinding check switched off
(:meth:`HostRules.sdk_settings`): two implementations of one rule would
disagree, as the SDK's prefix match and the same-origin rule did.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from mcp.server.transport_security import TransportSecuritySettings

from mcp_hub.pipeline.runtime import is_loopback

__all__ = ["HostRules", "matches"]

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def matches(value: str, patterns: Iterable[str]) -> bool:
    """``value`` equals a pattern, or a ``NAME:*`` pattern's NAME plus ``:PORT`` (digits only)."""
    value = value.lower()
    for pattern in patterns:
        pattern = pattern.lower()
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-1]  # keeps the colon
            port = value[len(base):]
            if value.startswith(base) and port.isascii() and port.isdigit() and len(port) <= 5:
                return True
    return False


@dataclass(frozen=True)
class HostRules:
    """The accepted Host and Origin values of one listener."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]
    check_host: bool = True

    @classmethod
    def for_bind(cls, bind_host: str, allowed_hosts: Iterable[str],
                 allowed_origins: Iterable[str]) -> HostRules:
        """Loopback binds accept the loopback names; a wildcard bind checks Host only when
        ``allowed_hosts`` lists names; any other bind adds its own address."""
        hosts, origins = list(allowed_hosts), list(allowed_origins)
        check_host = True
        if is_loopback(bind_host) or bind_host == "localhost":
            for name in _LOOPBACK_NAMES:
                hosts += [name, f"{name}:*"]
                origins += [f"http://{name}", f"http://{name}:*"]
        elif bind_host in ("0.0.0.0", "::", ""):
            # Listening everywhere: Host values cannot be guessed; operators list them.
            check_host = bool(hosts)
        else:
            hosts += [bind_host, f"{bind_host}:*"]
        return cls(tuple(hosts), tuple(origins), check_host)

    def host_allowed(self, host: str) -> bool:
        return not self.check_host or matches(host, self.hosts)

    def origin_allowed(self, origin: str, host: str) -> bool:
        if matches(origin, self.origins):
            return True
        parts = urlsplit(origin.lower())
        same = (parts.scheme in ("http", "https") and bool(host)
                and origin.lower() == f"{parts.scheme}://{host.lower()}")
        return same and self.host_allowed(host)

    def sdk_settings(self) -> TransportSecuritySettings:
        """The SDK transports' own check: off, because the guard enforces these rules first."""
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
