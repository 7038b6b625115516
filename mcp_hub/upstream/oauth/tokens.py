"""The SDK's ``TokenStorage`` for one upstream (and one identity), encrypted in a state store.

Records, all sealed with :class:`~mcp_hub.upstream.oauth.secretbox.SecretBox`:

- ``oauth/<server>/<identity>/tokens``: the token response plus the absolute
  time it expires (the SDK only keeps ``expires_in``, which means nothing after
  a restart);
- ``oauth/<server>/client``: the registered client (DCR or CIMD), shared by
  every identity of that server;
- ``oauth/<server>/discovery``: the authorization server and resource metadata
  found with the tokens, so a refresh after a restart goes to the right endpoint;
- ``oauth/<server>/<identity>/pending``: the scope a login must ask for, written
  when the hub found it needs a login (e.g. a step-up challenge);
- ``oauth/<server>/dpop``: the upstream's DPoP private key (``dpop = true``), which
  the tokens are bound to.

The server URL is part of each key so pointing a server at another URL starts over.

The records live in the embedded store (0600 files under ``<state dir>/oauth/``)
or, with ``[state] url``, in Redis (:mod:`.shared_store`) where every replica
sees them. Fresh tokens that cannot be written (Redis down) are kept in memory,
used, logged as unsaved and written on the next chance; a login whose tokens
could not be stored fails instead of reporting success.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_hub.errors import ConfigError
from mcp_hub.state import StateUnavailable
from mcp_hub.upstream.oauth.kvstore import FileStateStore, StateStore
from mcp_hub.upstream.oauth.secretbox import KEY_ENV, SecretBox, key_file, key_from_env, load_key

__all__ = ["HUB_IDENTITY", "TokenStore", "describe_location", "open_store", "store_location"]

logger = logging.getLogger(__name__)

#: The identity of hub-wide credentials (``mcp-hub login``), as opposed to a user's.
HUB_IDENTITY = "_hub"


def open_store(state_dir: Path, state_url: str | None = None) -> tuple[StateStore, SecretBox]:
    """The token records' backend and key: the embedded store under ``state_dir``, or the
    shared state store ``state_url`` names (``[state] url``)."""
    if not state_url:
        return FileStateStore(state_dir / "oauth"), SecretBox(load_key(state_dir))
    if not state_url.startswith(("redis://", "rediss://", "unix://")):
        raise ConfigError(f"[state] url: unsupported scheme in {state_url.split('://')[0]!r}; "
                          "use redis://HOST:PORT/DB or leave it out for the embedded store")
    from mcp_hub.upstream.oauth.shared_store import RedisTokenBackend

    backend = RedisTokenBackend(state_url)
    if not key_from_env():
        logger.warning(
            "OAuth tokens are kept in the shared state store (%s) but %s is not set: they are "
            "encrypted with this machine's key file %s, which other replicas do not have. Set "
            "%s to the same value on every replica and wherever `mcp-hub login` runs.",
            backend.where, KEY_ENV, key_file(state_dir), KEY_ENV)
    return backend, SecretBox(load_key(state_dir), shared=True)


def describe_location(state_dir: Path, state_url: str | None) -> dict[str, Any]:
    """Where tokens of this config live and which key seals them, without opening anything."""
    shared_key = key_from_env()
    key = KEY_ENV if shared_key else f"key file {key_file(state_dir)}"
    if not state_url:
        return {"backend": "embedded", "where": f"files under {state_dir / 'oauth'}", "key": key}
    from mcp_hub.state.redis_backend import safe_url

    found: dict[str, Any] = {"backend": "redis", "where": f"Redis at {safe_url(state_url)}",
                             "key": key}
    if not shared_key:
        found["warning"] = (f"{KEY_ENV} is not set: replicas cannot decrypt each other's "
                            "tokens; set the same value on every replica")
    return found


def store_location(backend: StateStore) -> dict[str, Any]:
    """Which token store is in use and where, for status and ``mcp-hub check`` (no secrets)."""
    return {"backend": getattr(backend, "kind", "custom"),
            "where": getattr(backend, "where", type(backend).__name__),
            "key": "MCP_HUB_SECRET_KEY" if key_from_env() else "key file"}


class TokenStore:
    """Tokens and client registration of one (server, identity), as ``TokenStorage`` wants."""

    def __init__(self, backend: StateStore, box: SecretBox, server: str, url: str,
                 identity: str = HUB_IDENTITY) -> None:
        self.backend = backend
        self.box = box
        self.server = server
        url_tag = hashlib.sha256(url.encode()).hexdigest()[:12]
        self._base = f"oauth/{server}/{url_tag}"
        self._user = f"{self._base}/{hashlib.sha256(identity.encode()).hexdigest()[:24]}"
        #: When the stored access token expires (epoch seconds), read with the tokens.
        self.expires_at: float | None = None
        #: Fresh tokens the backend refused (shared store down), kept until written.
        self.unsaved: dict[str, Any] | None = None

    async def _load(self, key: str) -> dict[str, Any] | None:
        blob = await self.backend.get(key)
        if blob is None:
            return None
        data: dict[str, Any] = json.loads(self.box.open(blob))
        return data

    async def _save(self, key: str, data: dict[str, Any]) -> None:
        await self.backend.put(key, self.box.seal(json.dumps(data).encode()))

    @property
    def where(self) -> str:
        """Where the records are (``files under …`` or ``Redis at …``), for messages."""
        return str(getattr(self.backend, "where", type(self.backend).__name__))

    async def flush(self) -> None:
        """Write tokens kept in memory while the store was down; quiet if it still is."""
        if self.unsaved is None:
            return
        try:
            await self._save(f"{self._user}/tokens", self.unsaved)
        except StateUnavailable:
            return
        self.unsaved = None
        logger.warning("%s: OAuth tokens kept in memory while the token store was down are "
                       "now stored", self.server)

    async def get_tokens(self) -> OAuthToken | None:
        await self.flush()
        if self.unsaved is not None:
            data: dict[str, Any] | None = self.unsaved
        else:
            data = await self._load(f"{self._user}/tokens")
        if data is None:
            self.expires_at = None
            return None
        self.expires_at = data.get("expires_at")
        return OAuthToken.model_validate(data["token"])

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in else None
        self.expires_at = expires_at
        record = {"token": tokens.model_dump(mode="json", exclude_none=True),
                  "expires_at": expires_at, "saved_at": time.time()}
        try:
            await self._save(f"{self._user}/tokens", record)
            await self.backend.delete(f"{self._user}/pending")
        except StateUnavailable as exc:
            self.unsaved = record
            logger.error("%s: new OAuth tokens could not be stored (%s); this process keeps "
                         "using them and stores them once the token store is back",
                         self.server, exc)
            return
        self.unsaved = None

    async def clear_tokens(self) -> bool:
        """Forget the tokens (logout, or a refresh token the server refused)."""
        self.expires_at = None
        self.unsaved = None
        return await self.backend.delete(f"{self._user}/tokens")

    async def has_tokens(self) -> bool:
        if self.unsaved is not None:
            return True
        return await self.backend.get(f"{self._user}/tokens") is not None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        data = await self._load(f"{self._base}/client")
        return None if data is None else OAuthClientInformationFull.model_validate(data)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._save(f"{self._base}/client",
                         client_info.model_dump(mode="json", exclude_none=True))

    async def clear_client_info(self) -> bool:
        return await self.backend.delete(f"{self._base}/client")

    async def get_discovery(self) -> dict[str, Any] | None:
        """The metadata discovered with the tokens (where to refresh them after a restart)."""
        return await self._load(f"{self._base}/discovery")

    async def set_discovery(self, data: dict[str, Any]) -> None:
        await self._save(f"{self._base}/discovery", data)

    async def get_dpop_key(self) -> str | None:
        """The PEM of the upstream's DPoP key, or None before the first one is made."""
        data = await self._load(f"{self._base}/dpop")
        return None if data is None else str(data["pem"])

    async def set_dpop_key(self, pem: str) -> None:
        await self._save(f"{self._base}/dpop", {"pem": pem})

    async def add_dpop_key(self, pem: str) -> bool:
        """Store ``pem`` as the DPoP key only if none is stored (atomic in the shared store:
        of replicas racing, one stores its key): True if this one was stored."""
        return await self.backend.put_if_absent(
            f"{self._base}/dpop", self.box.seal(json.dumps({"pem": pem}).encode()))

    async def get_pending_scope(self) -> str | None:
        data = await self._load(f"{self._user}/pending")
        return None if data is None else data.get("scope")

    async def set_pending_scope(self, scope: str | None) -> None:
        await self._save(f"{self._user}/pending", {"scope": scope})
