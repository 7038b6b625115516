"""Connect links: a short-lived, single-use, signed ticket bound to (server, identity).

A user who must connect an account gets ``/connect/NAME?t=TICKET``. The ticket
says which server, which identity asked and the elicitation it answers, and
when it expires; an HMAC-SHA256 over it (keyed from the hub's token key, so
replicas that share ``MCP_HUB_SECRET_KEY`` accept each other's links) proves the
hub issued it. A ticket opens one flow: a second use is refused, on any
replica, because the first use is recorded in the shared state store with a
set-if-absent (``SET NX`` on Redis) that expires with the ticket.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

from mcp_hub.state import StateBackend
from mcp_hub.upstream.oauth.errors import OAuthError

__all__ = ["ConnectLinks", "LinkClaims"]

#: How long a connect link stays valid.
LINK_SECONDS = 600.0


@dataclass(frozen=True, slots=True)
class LinkClaims:
    """What a valid ticket names."""

    server: str
    identity: str
    elicitation_id: str
    expires_at: float
    nonce: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ConnectLinks:
    """Issues and checks tickets; the state store remembers used nonces until they expire."""

    def __init__(self, key: bytes, seconds: float = LINK_SECONDS) -> None:
        self._key = hashlib.sha256(b"mcp-hub connect links\0" + key).digest()
        self.seconds = seconds

    def issue(self, server: str, identity: str) -> tuple[str, LinkClaims]:
        """A new ticket for ``identity`` connecting ``server``, and what it says."""
        claims = LinkClaims(server, identity, secrets.token_urlsafe(12),
                            time.time() + self.seconds, secrets.token_urlsafe(12))
        body = _b64(json.dumps({"s": claims.server, "i": claims.identity,
                                "e": claims.elicitation_id, "x": claims.expires_at,
                                "n": claims.nonce}, separators=(",", ":")).encode())
        return f"{body}.{self._mac(body)}", claims

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())

    def check(self, ticket: str, server: str) -> LinkClaims:
        """The claims of a valid, unexpired ticket for ``server``; OAuthError otherwise."""
        body, _, mac = ticket.partition(".")
        if not body or not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            raise OAuthError("this connect link is not valid")
        try:
            data = json.loads(_unb64(body))
            claims = LinkClaims(str(data["s"]), str(data["i"]), str(data["e"]),
                                float(data["x"]), str(data["n"]))
        except (binascii.Error, ValueError, KeyError, TypeError):
            raise OAuthError("this connect link is not valid") from None
        now = time.time()
        if claims.server != server:
            raise OAuthError("this connect link is for another server")
        if claims.expires_at < now:
            raise OAuthError("this connect link has expired: call the tool again for a new one")
        return claims

    async def redeem(self, ticket: str, server: str, state: StateBackend) -> LinkClaims:
        """:meth:`check`, then mark the ticket used in ``state``: a second use is refused."""
        claims = self.check(ticket, server)
        ttl = max(1.0, claims.expires_at - time.time() + 1.0)
        if not await state.put_if_absent(f"peruser/link/{claims.nonce}", b"1", ttl):
            raise OAuthError("this connect link was already used: call the tool again for a new one")
        return claims
