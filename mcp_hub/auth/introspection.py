"""Opaque access tokens through RFC 7662 token introspection, with a short cache.

The hub POSTs the token to the authorization server's introspection endpoint
(authenticating with its own client id and secret when configured) and accepts
an answer with ``"active": true`` whose ``exp`` is not past and whose ``iss``,
if given, is the configured issuer. An answer is reused for
``introspection_cache_seconds`` at most, never past the token's ``exp``.

Anyone can send made-up opaque tokens, and each would cost the authorization
server a request. Two bounds keep that in check:

* **inactive answers are cached** (for ``introspection_cache_seconds``, in a
  cache of their own so a flood of them cannot push out active tokens), so the
  same bad token costs one round trip, not one per request;
* **a token bucket per client address** (:class:`IntrospectionBudget`,
  ``introspection_burst`` tokens, refilled at ``introspection_per_minute``) pays
  for every token found in neither cache; an address whose bucket is empty gets
  :class:`Throttled` (429 with ``Retry-After``) without a request to the server.
  IPv6 addresses share the bucket of their /64.

Both caches are keyed by a BLAKE2b digest of the token; the token itself is kept
nowhere and logged nowhere.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections import OrderedDict
from typing import Any

import httpx2

from mcp_hub.auth.jwt_verify import InvalidToken

__all__ = ["IntrospectionBudget", "Introspector", "Throttled"]

_CACHE_SIZE = 4096
_TIMEOUT = 10.0
_MAX_ADDRESSES = 10_000


class Throttled(InvalidToken):
    """Too many unknown tokens from one address; ``retry_after`` seconds until the next may be asked."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("too many unknown tokens from this address; try again later")
        self.retry_after = retry_after


def _bucket_key(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is None:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else ip)


class IntrospectionBudget:
    """A token bucket per client address for introspections of tokens not cached."""

    def __init__(self, burst: int, per_minute: int) -> None:
        self.burst = float(burst)
        self.rate = per_minute / 60.0
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        #: Introspections refused so far.
        self.refused = 0

    def take(self, address: str) -> float:
        """Spend one token of ``address``: 0 if it had one, else seconds until it will."""
        key = _bucket_key(address)
        now = time.monotonic()
        level, stamp = self._buckets.pop(key, (self.burst, now))
        level = min(self.burst, level + (now - stamp) * self.rate)
        if level >= 1.0:
            level -= 1.0
            wait = 0.0
        else:
            wait = (1.0 - level) / self.rate
            self.refused += 1
        self._buckets[key] = (level, now)
        while len(self._buckets) > _MAX_ADDRESSES:
            self._buckets.popitem(last=False)
        return wait


def _keep(cache: OrderedDict[bytes, Any], digest: bytes, value: Any) -> None:
    cache[digest] = value
    cache.move_to_end(digest)
    if len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


class Introspector:
    """Asks the authorization server whether an opaque token is active."""

    def __init__(self, endpoint: str, *, issuer: str, client_id: str | None, client_secret: str | None,
                 cache_seconds: float, client: httpx2.AsyncClient | None = None,
                 budget: IntrospectionBudget | None = None) -> None:
        self.endpoint = endpoint
        self.issuer = issuer
        self._auth = (client_id, client_secret or "") if client_id else None
        self._cache_seconds = cache_seconds
        self._client = client
        self.budget = budget
        self._active: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()
        self._inactive: OrderedDict[bytes, float] = OrderedDict()
        #: Requests made to the introspection endpoint so far.
        self.asked = 0

    async def introspect(self, token: str, address: str = "?") -> dict[str, Any]:
        """The claims of an active token; :class:`InvalidToken` (or :class:`Throttled`) otherwise.

        ``address`` is the client's: a token in neither cache spends one of its tokens.
        """
        digest = hashlib.blake2b(token.encode(), digest_size=20).digest()
        now = time.time()
        hit = self._active.get(digest)
        if hit is not None and hit[0] > now:
            return hit[1]
        dead = self._inactive.get(digest)
        if dead is not None and dead > now:
            raise InvalidToken("the token is not active")
        if self.budget is not None:
            wait = self.budget.take(address)
            if wait > 0:
                raise Throttled(max(1, math.ceil(wait)))
        claims = await self._ask(token)
        until = now + self._cache_seconds
        if claims is None:
            _keep(self._inactive, digest, until)
            raise InvalidToken("the token is not active")
        exp = claims.get("exp")
        if isinstance(exp, (int, float)):
            until = min(until, float(exp))
        _keep(self._active, digest, (until, claims))
        return claims

    async def _ask(self, token: str) -> dict[str, Any] | None:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=_TIMEOUT, follow_redirects=False)
        extra: dict[str, Any] = {"auth": self._auth} if self._auth else {}
        self.asked += 1
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
