"""The live upstream sessions of per-user servers: one per (server, identity), bounded.

Each session runs in its own task in the pool's task group (an SDK session must
be closed by the task that opened it). A session is evicted when it has been
idle for ``idle_seconds``; at ``max_sessions`` the least recently used idle one
makes room, and when every session is busy a new user is refused with a clear
error instead of growing without bound.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
from mcp.client.session import ClientSession

from mcp_hub.errors import HubError

__all__ = ["PoolFull", "UserSessions"]

logger = logging.getLogger("mcp_hub.upstream.peruser")

Key = tuple[str, str]  # (server, identity)
Opener = Callable[[Key, Callable[[], None]], AbstractAsyncContextManager[ClientSession]]


class PoolFull(HubError):
    """Every per-user session is busy and the pool is at its bound."""


@dataclass(eq=False)
class _Entry:
    key: Key
    ready: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)
    session: ClientSession | None = None
    error: BaseException | None = None
    busy: int = 0
    last_used: float = 0.0
    #: Set when the user's tokens stopped working (refused refresh): they must connect again.
    needs_connect: bool = False


class UserSessions:
    """(server, identity) -> a live ``ClientSession`` opened by ``opener``."""

    def __init__(self, opener: Opener, *, max_sessions: int, idle_seconds: float) -> None:
        self._opener = opener
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self._entries: dict[Key, _Entry] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def count(self, server: str) -> int:
        return sum(1 for key in self._entries if key[0] == server)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Own the sessions' tasks and evict idle ones until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                while True:
                    await anyio.sleep(max(min(self.idle_seconds / 4, 30.0), 0.05))
                    self._evict_idle()
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def _evict_idle(self) -> None:
        now = anyio.current_time()
        for entry in list(self._entries.values()):
            if entry.busy == 0 and entry.ready.is_set() and now - entry.last_used > self.idle_seconds:
                self._close(entry, "idle")

    def _close(self, entry: _Entry, why: str) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            logger.info("per-user session of %s closed (%s)", entry.key[0], why,
                        extra={"server": entry.key[0]})
        entry.closing.set()

    def drop(self, server: str, identity: str | None = None) -> None:
        """Close the sessions of ``server`` (of one identity, or all of them)."""
        for key, entry in list(self._entries.items()):
            if key[0] == server and identity in (None, key[1]):
                self._close(entry, "dropped")

    def _make_room(self) -> None:
        if len(self._entries) < self.max_sessions:
            return
        idle = [e for e in self._entries.values() if e.busy == 0 and e.ready.is_set()]
        if not idle:
            raise PoolFull(f"all {self.max_sessions} per-user upstream sessions are busy; "
                           "try again shortly")
        self._close(min(idle, key=lambda e: e.last_used), "least recently used")

    @asynccontextmanager
    async def use(self, key: Key) -> AsyncIterator[_Entry]:
        """The live session of ``key`` (opened on first use), held busy while in use."""
        entry = self._entries.get(key)
        if entry is None or entry.needs_connect:
            if self._tg is None:
                raise HubError("the per-user session pool is not running")
            self._make_room()
            entry = _Entry(key)
            self._entries[key] = entry
            self._tg.start_soon(self._serve, entry)
        entry.busy += 1
        try:
            await entry.ready.wait()
            if entry.error is not None:
                raise entry.error
            entry.last_used = anyio.current_time()
            yield entry
        finally:
            entry.busy -= 1
            entry.last_used = anyio.current_time()

    async def _serve(self, entry: _Entry) -> None:
        def tokens_refused() -> None:
            entry.needs_connect = True
            self._close(entry, "tokens refused")

        try:
            async with self._opener(entry.key, tokens_refused) as session:
                entry.session = session
                entry.ready.set()
                await entry.closing.wait()
        except Exception as exc:  # reported to the callers waiting on this entry
            entry.error = exc
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
        finally:
            entry.session = None
            entry.ready.set()
            entry.closing.set()
