"""Opaque access tokens through RFC 7662 token introspection, with a short cache.

The hub POSTs the token to the authorization server's introspection endpoint
(authenticating with its own client id and secret when configured) and accepts
an answer with ``"active": true`` whose ``exp`` is not past and whose ``iss``,
if given, is the configured issuer. An answer is reused for
``introspection_cache_seconds`` at most, never past the token's ``exp``;
inactive answers are cached too, so a bad token does not cost a round trip
per request.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from typing import Any

import httpx2

from mcp_hub.auth.jwt_verify import InvalidToken

__all__ = ["Introspector"]

_CACHE_SIZE = 4096
_TIMEOUT = 10.0


class Introspector:
    """Asks the authorization server whether an opaque token is active."""

    def __init__(self, endpoint: str, *, issuer: str, client_id: str | None, client_secret: str | None,
                 cache_seconds: float, client: httpx2.AsyncClient | None = None) -> None:
        self.endpoint = endpoint
        self.issuer = issuer
        self._auth = (client_id, client_secret or "") if client_id else None
        self._cache_seconds = cache_seconds
        self._client = client
        self._cache: OrderedDict[bytes, tuple[float, dict[str, Any] | None]] = OrderedDict()

    async def introspect(self, token: str) -> dict[str, Any]:
        """The claims of an active token; :class:`InvalidToken` otherwise."""
        digest = hashlib.blake2b(token.encode(), digest_size=20).digest()
        now = time.time()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now:
            if hit[1] is None:
                raise InvalidToken("the token is not active")
            return hit[1]
        claims = await self._ask(token)
        exp = claims.get("exp") if claims else None
        until = now + self._cache_seconds
        if isinstance(exp, (int, float)):
            until = min(until, float(exp))
        self._cache[digest] = (until, claims)
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        if claims is None:
            raise InvalidToken("the token is not active")
        return claims

    async def _ask(self, token: str) -> dict[str, Any] | None:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=_TIMEOUT, follow_redirects=False)
        extra: dict[str, Any] = {"auth": self._auth} if self._auth else {}
        try:
            response = await self._client.post(
                self.endpoint, data={"token": token, "token_type_hint": "access_token"},
                headers={"Accept": "application/json"}, **extra)
        except httpx2.HTTPError as exc:
            raise InvalidToken(f"token introspection failed ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise InvalidToken(f"token introspection answered {response.status_code}")
        try:
            body = response.json()
        except ValueError:
            raise InvalidToken("token introspection did not answer JSON") from None
        if not isinstance(body, dict) or body.get("active") is not True:
            return None
        exp = body.get("exp")
        if isinstance(exp, (int, float)) and exp <= time.time():
            return None
        iss = body.get("iss")
        if iss is not None and str(iss).rstrip("/") != self.issuer.rstrip("/"):
            return None
        return body

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
