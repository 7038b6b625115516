"""The token store's key-value backend in the shared state store (``[state] url``, Redis).

With ``[state] url`` set, OAuth records (tokens, the registered client, the
discovered metadata) live in Redis under ``mcp-hub:oauth/…`` so that every
replica, and ``mcp-hub login``/``logout`` run from a shell, see the same ones.
Values are sealed before they get here; Redis never holds a plaintext token.

A redis-py asyncio client belongs to the event loop it was first used on, and a
process may run several loops one after another (the CLI, tests), so each loop
gets its own :class:`~mcp_hub.state.redis_backend.RedisState`.

When Redis cannot be reached every call raises
:class:`~mcp_hub.state.base.StateUnavailable` saying it is the token store and
where it is (no password): the server then shows that error instead of
``needs_login``, and a login fails loudly instead of storing nothing.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING, NoReturn

from mcp_hub.state import StateUnavailable, require_redis

if TYPE_CHECKING:
    from mcp_hub.state.redis_backend import RedisState

__all__ = ["RedisTokenBackend"]


class RedisTokenBackend:
    """:class:`~mcp_hub.upstream.oauth.kvstore.StateStore` over the Redis state backend."""

    kind = "redis"

    def __init__(self, url: str, prefix: str = "mcp-hub") -> None:
        require_redis()
        from mcp_hub.state.redis_backend import RedisState, safe_url

        self.url = url
        self.prefix = prefix
        #: Where the tokens are, for messages and status (no password).
        self.where = f"Redis at {safe_url(url)}"
        self._factory = RedisState
        self._per_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RedisState] = (
            weakref.WeakKeyDictionary())

    def _state(self) -> RedisState:
        loop = asyncio.get_running_loop()
        state = self._per_loop.get(loop)
        if state is None:
            state = self._per_loop[loop] = self._factory(self.url, prefix=self.prefix)
        return state

    def _failed(self, exc: StateUnavailable) -> NoReturn:
        raise StateUnavailable(f"OAuth token store unavailable ({self.where}): {exc}") from None

    async def get(self, key: str) -> bytes | None:
        try:
            return await self._state().get(key)
        except StateUnavailable as exc:
            self._failed(exc)

    async def put(self, key: str, value: bytes) -> None:
        try:
            await self._state().put(key, value)
        except StateUnavailable as exc:
            self._failed(exc)

    async def put_if_absent(self, key: str, value: bytes) -> bool:
        try:
            return await self._state().put_if_absent(key, value, None)
        except StateUnavailable as exc:
            self._failed(exc)

    async def delete(self, key: str) -> bool:
        state = self._state()
        try:
            existed = await state.get(key) is not None
            await state.delete(key)
        except StateUnavailable as exc:
            self._failed(exc)
        return existed
