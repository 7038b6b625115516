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
  when the hub found it needs a login (e.g. a step-up challenge).

The server URL is part of each key so pointing a server at another URL starts over.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcp_hub.upstream.oauth.kvstore import FileStateStore, StateStore
from mcp_hub.upstream.oauth.secretbox import SecretBox, load_key

__all__ = ["HUB_IDENTITY", "TokenStore", "open_store"]

#: The identity of hub-wide credentials (``mcp-hub login``), as opposed to a user's.
HUB_IDENTITY = "_hub"


def open_store(state_dir: Path) -> tuple[StateStore, SecretBox]:
    """The embedded state store and the token key under ``state_dir``."""
    return FileStateStore(state_dir / "oauth"), SecretBox(load_key(state_dir))


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

    async def _load(self, key: str) -> dict[str, Any] | None:
        blob = await self.backend.get(key)
        if blob is None:
            return None
        data: dict[str, Any] = json.loads(self.box.open(blob))
        return data

    async def _save(self, key: str, data: dict[str, Any]) -> None:
        await self.backend.put(key, self.box.seal(json.dumps(data).encode()))

    async def get_tokens(self) -> OAuthToken | None:
        data = await self._load(f"{self._user}/tokens")
        if data is None:
            self.expires_at = None
            return None
        self.expires_at = data.get("expires_at")
        return OAuthToken.model_validate(data["token"])

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + int(tokens.expires_in) if tokens.expires_in else None
        self.expires_at = expires_at
        await self._save(f"{self._user}/tokens",
                         {"token": tokens.model_dump(mode="json", exclude_none=True),
                          "expires_at": expires_at, "saved_at": time.time()})
        await self.backend.delete(f"{self._user}/pending")

    async def clear_tokens(self) -> bool:
        """Forget the tokens (logout, or a refresh token the server refused)."""
        self.expires_at = None
        return await self.backend.delete(f"{self._user}/tokens")

    async def has_tokens(self) -> bool:
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

    async def get_pending_scope(self) -> str | None:
        data = await self._load(f"{self._user}/pending")
        return None if data is None else data.get("scope")

    async def set_pending_scope(self, scope: str | None) -> None:
        await self._save(f"{self._user}/pending", {"scope": scope})
