"""A bounded in-memory event store for resumable Streamable HTTP streams.

A client of the 2025 protocol era whose POST response stream drops can open
``GET /mcp`` with ``Last-Event-ID`` and receive what it missed — the answer to
its call included. The SDK transport stores every message it sends through an
:class:`~mcp.server.streamable_http.EventStore`; this one keeps them in memory
under one global bound (``hub.http.event_store_max_events``): when full, the
oldest event goes, whatever its session. It never grows past the bound.

Each session writes through its own :class:`SessionEvents` view, and a replay
only ever returns events of the session that asks: event ids are hub-wide
counters, so they are guessable, but another session's id replays nothing.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Callable

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCMessage

__all__ = ["BoundedEventStore", "SessionEvents"]


class SessionEvents(EventStore):
    """One session's view of the shared store (what the SDK transport is given)."""

    def __init__(self, store: BoundedEventStore) -> None:
        self.store = store
        #: The Streamable HTTP session id, once the session manager has assigned it.
        self.session_id: str | None = None

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        return self.store.add(self, stream_id, message)

    async def replay_events_after(self, last_event_id: EventId,
                                  send_callback: EventCallback) -> StreamId | None:
        return await self.store.replay(self, last_event_id, send_callback)


_Key = tuple[SessionEvents, StreamId]


class BoundedEventStore:
    """The events of every session, at most ``max_events`` of them, oldest evicted first."""

    def __init__(self, max_events: int) -> None:
        if max_events < 1:
            raise ValueError("max_events must be at least 1")
        self.max_events = max_events
        self._events: OrderedDict[EventId, tuple[_Key, JSONRPCMessage | None]] = OrderedDict()
        self._streams: dict[_Key, deque[EventId]] = {}
        self._ids = itertools.count(1)
        #: Called with (session id, stream id) when a client resumes a stream.
        self.on_replay: Callable[[str | None, StreamId], None] | None = None

    def __len__(self) -> int:
        return len(self._events)

    @property
    def streams(self) -> int:
        return len(self._streams)

    def view(self) -> SessionEvents:
        return SessionEvents(self)

    def add(self, owner: SessionEvents, stream_id: StreamId, message: JSONRPCMessage | None
            ) -> EventId:
        event_id = str(next(self._ids))
        key = (owner, stream_id)
        self._events[event_id] = (key, message)
        self._streams.setdefault(key, deque()).append(event_id)
        while len(self._events) > self.max_events:
            _, (old_key, _) = self._events.popitem(last=False)
            ids = self._streams[old_key]
            ids.popleft()  # events leave in the order they came: it is the stream's first
            if not ids:
                del self._streams[old_key]
        return event_id

    def stream_of(self, owner_session: str | None, event_id: EventId) -> StreamId | None:
        """The stream ``event_id`` belongs to, if it is still stored for that session."""
        found = self._events.get(event_id)
        if found is None or found[0][0].session_id != owner_session:
            return None
        return found[0][1]

    async def replay(self, owner: SessionEvents, last_event_id: EventId,
                     send_callback: EventCallback) -> StreamId | None:
        found = self._events.get(last_event_id)
        if found is None or found[0][0] is not owner:
            return None
        key = found[0]
        ids = list(self._streams.get(key, ()))
        later = ids[ids.index(last_event_id) + 1:] if last_event_id in ids else []
        missed = [(eid, self._events[eid][1]) for eid in later]
        if self.on_replay is not None:
            self.on_replay(owner.session_id, key[1])
        for eid, message in missed:
            if message is not None:  # priming events carry no message
                await send_callback(EventMessage(message, eid))
        return key[1]

    def forget(self, owner: SessionEvents) -> None:
        """Drop every event of a session that has ended."""
        for key in [k for k in self._streams if k[0] is owner]:
            for event_id in self._streams.pop(key):
                self._events.pop(event_id, None)
