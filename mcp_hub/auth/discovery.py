"""The authorization server's metadata (RFC 8414 or OIDC discovery) and its key set.

:class:`IssuerKeys` finds the ``jwks_uri`` (unless configured), fetches the JWKS,
and fetches it again when a token names a ``kid`` it does not know — that is how
a key rotation at the authorization server is picked up without a restart.

Made-up ``kid``s cost anyone nothing and must not delay real ones:

* **One fetch in flight** (single flight, not a queue): every lookup that needs a
  fresher key set waits for the same fetch — the one under way if it began after
  the lookup asked, else the next one — and then looks again. However many
  unknown ``kid``s arrive, a newly rotated key waits for at most one spacing and
  one fetch.
* **Spacing**: two fetches are at least ``jwks_refresh_min_seconds`` apart.
* **Negative cache**: a ``kid`` that a fetch begun after it was asked for did not
  contain is remembered for ``jwks_unknown_kid_seconds`` and causes no fetch
  meanwhile (bounded, oldest forgotten first). Lookups always see the newest key
  set first, so a ``kid`` that appears in a fetch made for another reason is found.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt

from mcp_hub.errors import HubError

__all__ = ["DiscoveryError", "IssuerKeys", "metadata_urls"]

logger = logging.getLogger(__name__)

_TIMEOUT = 10.0
_MAX_UNKNOWN = 4096


class DiscoveryError(HubError):
    """The authorization server's metadata or keys could not be fetched or made sense of."""


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order MCP clients try them.

    RFC 8414 inserts the well-known segment before the issuer's path; OIDC
    discovery appends it; both forms are tried for an issuer with a path.
    """
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server",
                f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}",
            f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


async def _get_json(client: httpx2.AsyncClient, url: str) -> dict[str, Any] | None:
    try:
        response = await client.get(url, headers={"Accept": "application/json"})
    except httpx2.HTTPError as exc:
        raise DiscoveryError(f"cannot reach {url}: {type(exc).__name__}") from None
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


@dataclass
class _Flight:
    """One key-set fetch that lookups wait for: when it began, how it ended."""

    began: float = float("inf")
    error: DiscoveryError | None = None
    landed: anyio.Event = field(default_factory=anyio.Event)


class IssuerKeys:
    """The issuer's metadata and signing keys, fetched lazily and refreshed on an unknown kid."""

    def __init__(self, issuer: str, *, jwks_uri: str | None = None, refresh_min_seconds: float = 1.0,
                 unknown_kid_seconds: float = 60.0, client: httpx2.AsyncClient | None = None) -> None:
        self.issuer = issuer
        self._jwks_uri = jwks_uri
        self._refresh_min = refresh_min_seconds
        self._unknown_seconds = unknown_kid_seconds
        self._client = client
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, jwt.PyJWK] = {}
        self._anonymous: list[jwt.PyJWK] = []
        self._fetched_at = float("-inf")
        self._last_began = float("-inf")
        self._flight: _Flight | None = None
        self._unknown: OrderedDict[str, float] = OrderedDict()
        #: Key-set fetches made so far.
        self.fetches = 0

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=_TIMEOUT, follow_redirects=False)
        return self._client

    async def metadata(self) -> dict[str, Any]:
        """The authorization server metadata; its ``issuer`` must be the configured one."""
        if self._metadata is not None:
            return self._metadata
        for url in metadata_urls(self.issuer):
            body = await _get_json(self._http(), url)
            if body is None:
                continue
            if str(body.get("issuer", "")).rstrip("/") != self.issuer.rstrip("/"):
                raise DiscoveryError(f"{url} names issuer {body.get('issuer')!r}, not {self.issuer!r}")
            self._metadata = body
            return body
        raise DiscoveryError(f"no authorization server metadata found for {self.issuer}")

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The signing key named ``kid`` (the only key if the token names none and there is one)."""
        found = self._lookup(kid)
        if found is not None or self._recently_unknown(kid):
            return found
        await self._fresh_since(time.monotonic())
        found = self._lookup(kid)
        if found is None:
            self._remember_unknown(kid)
        return found

    def _lookup(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is not None:
            return self._keys.get(kid)
        every = [*self._keys.values(), *self._anonymous]
        return every[0] if len(every) == 1 else None

    def _recently_unknown(self, kid: str | None) -> bool:
        key = kid or ""
        seen = self._unknown.get(key)
        if seen is None:
            return False
        if time.monotonic() - seen < self._unknown_seconds:
            return True
        del self._unknown[key]
        return False

    def _remember_unknown(self, kid: str | None) -> None:
        self._unknown[kid or ""] = time.monotonic()
        self._unknown.move_to_end(kid or "")
        while len(self._unknown) > _MAX_UNKNOWN:
            self._unknown.popitem(last=False)

    async def _fresh_since(self, asked: float) -> None:
        """Return once a fetch that began at or after ``asked`` has landed (or raise its error).

        A fetch under way that began earlier may predate the key being looked for,
        so the lookup waits for the next one instead. Only one fetch is ever in
        flight; everyone else waits on its event.
        """
        while self._last_began < asked:
            flight = self._flight
            if flight is None:
                flight = self._flight = _Flight()
                await self._fly(flight)
            else:
                await flight.landed.wait()
            if flight.error is not None and flight.began >= asked:
                raise flight.error

    async def _fly(self, flight: _Flight) -> None:
        """Run one fetch, spaced from the last; shielded, since others wait for it."""
        try:
            with anyio.CancelScope(shield=True):
                wait = self._fetched_at + self._refresh_min - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                flight.began = time.monotonic()
                try:
                    await self._fetch()
                except DiscoveryError as exc:
                    flight.error = exc
                except Exception as exc:  # every waiter must learn that it failed
                    flight.error = DiscoveryError(f"fetching the keys of {self.issuer} failed: "
                                                  f"{type(exc).__name__}")
                finally:
                    self._fetched_at = time.monotonic()
                    self._last_began = flight.began
        finally:
            self._flight = None
            flight.landed.set()

    async def _fetch(self) -> None:
        uri = self._jwks_uri or (await self.metadata()).get("jwks_uri")
        if not isinstance(uri, str):
            raise DiscoveryError(f"the metadata of {self.issuer} names no jwks_uri")
        self.fetches += 1
        body = await _get_json(self._http(), uri)
        if body is None or not isinstance(body.get("keys"), list):
            raise DiscoveryError(f"{uri} did not return a JSON Web Key Set")
        keys: dict[str, jwt.PyJWK] = {}
        anonymous: list[jwt.PyJWK] = []
        for raw in body["keys"]:
            if not isinstance(raw, dict) or raw.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK(raw)
            except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError):
                logger.warning("skipped a key of %s that cannot be used", uri)
                continue
            if isinstance(raw.get("kid"), str):
                keys[raw["kid"]] = key
            else:
                anonymous.append(key)
        self._keys, self._anonymous = keys, anonymous
        logger.info("fetched %d signing key(s) of %s", len(keys) + len(anonymous), self.issuer)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
