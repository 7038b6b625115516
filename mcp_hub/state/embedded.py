"""The default backend: in-process, nothing to install, for one hub process.

It holds what a single hub needs while it runs (session state, rate windows);
the bus delivers to the process itself. Tool pins stay in ``<state dir>/pins.json``
(:mod:`mcp_hub.pins.pinning`), which several processes on one machine already share.
"""

from __future__ import annotations

import time
from collections import deque

from mcp_hub.state.base import BusHandler, StateBackend

__all__ = ["EmbeddedState"]


class EmbeddedState(StateBackend):
    """Dictionaries with expiry; the bus calls this process's handler."""

    kind = "embedded"
    shared = False

    def __init__(self) -> None:
        self._values: dict[str, tuple[bytes, float | None]] = {}
        self._sets: dict[str, set[str]] = {}
        self._hits: dict[str, deque[float]] = {}
        self._handler: BusHandler | None = None

    async def get(self, key: str) -> bytes | None:
        found = self._values.get(key)
        if found is None:
            return None
        value, expires = found
        if expires is not None and expires <= time.monotonic():
            del self._values[key]
            return None
        return value

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        self._values[key] = (value, None if ttl is None else time.monotonic() + ttl)

    async def put_if_absent(self, key: str, value: bytes, ttl: float | None) -> bool:
        if await self.get(key) is not None:
            return False
        await self.put(key, value, ttl)
        return True

    async def take(self, key: str) -> bytes | None:
        value = await self.get(key)
        self._values.pop(key, None)
        return value

    async def delete(self, key: str) -> None:
        self._values.pop(key, None)
        self._sets.pop(key, None)

    async def set_add(self, key: str, member: str, ttl: float | None = None) -> None:
        self._sets.setdefault(key, set()).add(member)

    async def set_remove(self, key: str, member: str) -> None:
        members = self._sets.get(key)
        if members is not None:
            members.discard(member)
            if not members:
                del self._sets[key]

    async def set_members(self, key: str) -> set[str]:
        return set(self._sets.get(key, ()))

    async def admit(self, key: str, limit: int, window: float) -> bool:
        now = time.monotonic()
        hits = self._hits.setdefault(key, deque())
        while hits and now - hits[0] > window:
            hits.popleft()
        if len(hits) >= limit:
            return False
        hits.append(now)
        return True

    async def publish(self, data: bytes) -> None:
        if self._handler is not None:
            await self._handler(data)

    def on_message(self, handler: BusHandler) -> None:
        self._handler = handler
