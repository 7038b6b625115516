"""Live downstream sessions and the debounced change notifications sent to them.

The SDK keeps no public list of connected clients, so the server records each
handshake-era connection when its ``notifications/initialized`` arrives (and
on any later request, which covers clients that reconnect mid-stream). The set
is weak: a connection the transport has dropped is garbage and disappears by
itself; a per-connection exit-stack callback forgets it eagerly too.

Changes are coalesced: a burst of registry mutations (an upstream refresh, a
reconnect, 100 list_changed in a second) becomes one notification per kind once
the burst has been quiet for ``debounce`` (at most ``max_delay`` after it
began; the first change after a quiet spell goes out at once), sent to every live handshake session and published on the
``subscriptions/listen`` bus for 2026-07-28 clients.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.lowlevel
from mcp.server.connection import Connection
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)

from mcp_hub.plumbing.bursts import settle_burst

__all__ = ["AnnouncedToolsChanged", "ChangeKind", "SessionTracker"]

logger = logging.getLogger(__name__)

ChangeKind = Literal["tools", "prompts", "resources"]
_KINDS: tuple[ChangeKind, ...] = ("tools", "prompts", "resources")


@dataclass(frozen=True)
class AnnouncedToolsChanged(ToolsListChanged):
    """A tools list change some upstreams announced although the hub's listing of
    theirs came out the same: it goes to the callers that may use those servers,
    whether or not the digest of the tools they see moved."""

    servers: frozenset[str] = frozenset()


class SessionTracker:
    """Tracks live downstream connections and broadcasts list changes to them."""

    def __init__(self, *, debounce: float = 0.02, max_delay: float = 1.0) -> None:
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()
        self.bus = InMemorySubscriptionBus()
        self._debounce = debounce
        self._max_delay = max_delay
        # A change this long after the previous notification counts as a new burst.
        self._idle = max(0.25, 5 * debounce)
        self._last_sent = float("-inf")
        self._marks = 0
        self._pending: set[ChangeKind] = set()
        #: Servers whose announced, unchanged tools list goes out with the next broadcast.
        self._announced: set[str] = set()
        self._wake: anyio.Event | None = None
        self._token: Any = None
        self._loop_thread = 0
        #: Counters exposed as metrics: notifications sent per kind.
        self.sent: dict[str, int] = dict.fromkeys(_KINDS, 0)
        #: A digest of the tools a connection sees (set by the server); with it, a
        #: tools/list_changed goes only to connections whose visible tools changed.
        self.visible: Callable[[Connection], int] | None = None
        #: ``uses_server(conn, server)``: the connection's caller may use that server's tools
        #: (set by the server); an announced, unchanged tools list goes to those connections.
        self.uses_server: Callable[[Connection, str], bool] | None = None
        #: Works out ``visible`` of a connection in slices of the loop beforehand (optional).
        self.prepare_visible: Callable[[Connection], Awaitable[None]] | None = None
        #: A counter per kind, bumped the moment a change is reported (prepared lists key on it).
        self.generations: dict[str, int] = dict.fromkeys(_KINDS, 0)
        self._by_id: weakref.WeakValueDictionary[str, Connection] = weakref.WeakValueDictionary()

    # -- sessions -------------------------------------------------------------------------
    def add(self, connection: Connection) -> None:
        """Remember a live connection (idempotent)."""
        if connection in self._connections:
            return
        self._connections.add(connection)
        self._tools_changed_for(connection)  # the baseline: what it sees now
        sid = getattr(connection, "session_id", None)
        if isinstance(sid, str):
            self._by_id[sid] = connection
        ref = weakref.ref(connection)

        async def _forget() -> None:
            conn = ref()
            if conn is not None:
                self._connections.discard(conn)
                self._by_id.pop(getattr(conn, "session_id", None) or "", None)

        try:
            connection.exit_stack.push_async_callback(_forget)
        except Exception:  # an exit stack already unwound: the weak set still cleans up
            logger.debug("could not register connection cleanup", exc_info=True)

    def by_session_id(self, session_id: str) -> Connection | None:
        """The live connection of a Streamable HTTP session, if it has been seen."""
        return self._by_id.get(session_id)

    @property
    def count(self) -> int:
        return len(self._connections)

    def connections(self) -> list[Connection]:
        return list(self._connections)

    # -- change notifications ----------------------------------------------------------------
    def announced_tools(self, server: str) -> None:
        """``server`` said its tools changed; the hub's listing found them the same.

        Called on the loop. Its callers hear a ``tools/list_changed`` all the same
        (the upstream may know of a change the hub does not compare).
        """
        self._announced.add(server)
        self.changed("tools")

    def changed(self, kind: ChangeKind) -> None:
        """Schedule a ``list_changed`` of ``kind``; cheap and callable from any thread."""
        self.generations[kind] = self.generations.get(kind, 0) + 1
        token = self._token
        if token is None or threading.get_ident() == self._loop_thread:
            self._mark(kind)
            return
        try:
            anyio.from_thread.run_sync(self._mark, kind, token=token)
        except RuntimeError:  # the loop is gone: nothing left to notify
            self._pending.add(kind)

    def _mark(self, kind: ChangeKind) -> None:
        self._pending.add(kind)
        self._marks += 1
        if self._wake is not None:
            self._wake.set()

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The broadcaster loop; run it in the hub's task group."""
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()
        self._wake = anyio.Event()
        if self._pending:
            self._wake.set()
        task_status.started()
        while True:
            await self._wake.wait()
            # Inside a burst: wait for a quiet window (no new change for `debounce`), but
            # never longer than `max_delay`, then send everything once; the first change
            # after a quiet spell goes out at once (leading edge).
            await settle_burst(self._last_sent, idle=self._idle, debounce=self._debounce,
                               max_delay=self._max_delay, marks=lambda: self._marks)
            self._wake = anyio.Event()
            kinds, self._pending = self._pending, set()
            self._last_sent = anyio.current_time()
            for kind in _KINDS:
                if kind in kinds:
                    await self._broadcast(kind)

    async def _broadcast(self, kind: ChangeKind) -> None:
        self.sent[kind] += 1
        event: ToolsListChanged | PromptsListChanged | ResourcesListChanged
        announced = frozenset(self._announced) if kind == "tools" else frozenset()
        if kind == "tools":
            self._announced = set()
            event = AnnouncedToolsChanged(announced) if announced else ToolsListChanged()
        elif kind == "prompts":
            event = PromptsListChanged()
        else:
            event = ResourcesListChanged()
        if kind == "tools" and self.prepare_visible is not None:
            # Before anyone compares digests (the bus's listeners too): one caller's digest
            # is prepared once, in slices, and the comparisons below find it cached.
            for conn in list(self._connections):
                try:
                    await self.prepare_visible(conn)
                except Exception:
                    logger.debug("could not prepare the tools a connection sees", exc_info=True)
        await self.bus.publish(event)
        for i, conn in enumerate(list(self._connections)):
            if i % 8 == 7:  # a notification to each of many sessions: calls go in between
                await anyio.lowlevel.checkpoint()
            try:
                if kind == "tools":
                    if not (self._tools_changed_for(conn) or self._may_use(conn, announced)):
                        continue
                    await conn.send_tool_list_changed()
                elif kind == "prompts":
                    await conn.send_prompt_list_changed()
                else:
                    await conn.send_resource_list_changed()
            except Exception:
                logger.debug("dropping a connection that failed a notification", exc_info=True)
                self._connections.discard(conn)

    def _may_use(self, conn: Connection, servers: frozenset[str]) -> bool:
        """Whether ``conn``'s caller may use any of ``servers`` (False if none or unknown)."""
        if not servers or self.uses_server is None:
            return False
        try:
            return any(self.uses_server(conn, server) for server in servers)
        except Exception:
            logger.debug("server visibility check failed", exc_info=True)
            return False

    def _tools_changed_for(self, conn: Connection) -> bool:
        """Whether the tools ``conn`` sees differ from the last time it was told (True if unknown)."""
        state = getattr(conn, "state", None)
        if self.visible is None or not isinstance(state, dict):
            return True
        try:
            digest = self.visible(conn)
        except Exception:
            logger.debug("visible-tools digest failed", exc_info=True)
            return True
        before = state.get("mcp_hub.visible_tools")
        state["mcp_hub.visible_tools"] = digest
        return before != digest

    async def resource_updated(self, uri: str, subscribers: list[Connection]) -> None:
        """Tell subscribed connections (and listen streams) that ``uri`` changed."""
        await self.bus.publish(ResourceUpdated(uri=uri))
        for conn in subscribers:
            try:
                await conn.send_resource_updated(uri)
            except Exception:
                logger.debug("resource update to a dead connection dropped", exc_info=True)
