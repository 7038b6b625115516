"""A bounded in-memory event store for resumable Streamable HTTP streams.

A client of the 2025 protocol era whose POST response stream drops can open
``GET /mcp`` with ``Last-Event-ID`` and receive what it missed — the answer to
its call included. The SDK transport stores every message it sends through an
:class:`~mcp.server.streamable_http.EventStore`; this one keeps them in memory
under global bounds: at most ``hub.http.event_store_max_events`` events, and at
most ``hub.http.event_store_max_bytes`` of responses (the messages that can be
big; each is measured once, as JSON). When either is reached the oldest event
goes, whatever its session: the store never grows past its bounds. The events
of a stream whose answer was delivered are dropped at once (nobody resumes a
finished stream), so in practice the store holds little more than the streams
that dropped.

Each session writes through its own :class:`SessionEvents` view, and a replay
only ever returns events of the session that asks: event ids are hub-wide
counters, so they are guessable, but another session's id replays nothing.

A resumed stream has a gap in the SDK transport: after the replay it stores a
priming event, sends it, and only then registers the stream for live messages.
A message stored in that gap was not replayed and finds no stream, so the
client would wait on its resumed stream for an answer that never comes (a
call whose answer arrives just as its client resumes: the upstream polling
case of SEP-1699). The view closes the gap: a message for a stream that was
just replayed waits, bounded by ``REGISTER_WAIT``, until the transport has
registered that stream, and then goes out on it live.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pydantic_core
from mcp.server.streamable_http import GET_STREAM_KEY, EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.types import JSONRPCError, JSONRPCMessage, JSONRPCResponse

from mcp_hub.compat.sdk_http import request_streams

__all__ = ["REGISTER_WAIT", "BoundedEventStore", "SessionEvents"]

#: How long a message for a just-replayed stream waits for the transport to register it.
REGISTER_WAIT = 2.0


class SessionEvents(EventStore):
    """One session's view of the shared store (what the SDK transport is given)."""

    def __init__(self, store: BoundedEventStore) -> None:
        self.store = store
        #: The Streamable HTTP session id, once the session manager has assigned it.
        self.session_id: str | None = None
        #: The session's SDK transport, once admitted (where resumed streams register).
        self.transport: Any = None
        #: Streams just replayed whose live registration is not yet seen, with the time
        #: (``anyio.current_time``) after which nobody waits for it any more.
        self._replayed: dict[StreamId, float] = {}

    async def _registered(self, stream_id: StreamId) -> None:
        """Wait (bounded) until the transport registered the just-replayed ``stream_id``.

        The SDK signals nothing when it registers a resumed stream, so this looks
        for it every couple of milliseconds; it happens within a few loop turns."""
        transport = self.transport
        deadline = self._replayed.pop(stream_id)
        with anyio.move_on_after(deadline - anyio.current_time()):
            while (transport is not None and not transport.is_terminated  # noqa: ASYNC110
                   and stream_id not in request_streams(transport)):
                await anyio.sleep(0.002)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        if message is not None and stream_id in self._replayed:
            await self._registered(stream_id)
        hook = self.store.on_standalone
        if hook is not None and stream_id == GET_STREAM_KEY and message is not None and (
                self.session_id is not None):
            # Another replica may hold this session's GET stream (mcp_hub.downstream.replicas.bus).
            await hook(self.session_id, message)
        event_id = self.store.add(self, stream_id, message)
        stored = self.store.on_stored
        if stored is not None and self.session_id is not None:
            # A dropped stream may be resumed on another replica (mcp_hub.downstream.replicas.event_mirror).
            await stored(self.session_id, stream_id, event_id, message)
        return event_id

    async def replay_events_after(self, last_event_id: EventId,
                                  send_callback: EventCallback) -> StreamId | None:
        stream_id = await self.store.replay(self, last_event_id, send_callback)
        if stream_id is not None and self.transport is not None:
            self._replayed[stream_id] = anyio.current_time() + REGISTER_WAIT
        return stream_id


_Key = tuple[SessionEvents, StreamId]


class BoundedEventStore:
    """The events of every session, at most ``max_events`` of them, oldest evicted first."""

    def __init__(self, max_events: int, max_bytes: int = 64 * 1024 * 1024) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("the bounds must be positive")
        self.max_events = max_events
        self.max_bytes = max_bytes
        #: Bytes of the responses held (other messages are small and counted by number).
        self.bytes = 0
        self._events: OrderedDict[EventId, tuple[_Key, JSONRPCMessage | None, int]] = (
            OrderedDict())
        self._sessions: dict[str, SessionEvents] = {}
        self._streams: dict[_Key, deque[EventId]] = {}
        self._ids = itertools.count(1)
        #: Called with (session id, stream id) when a client resumes a stream.
        self.on_replay: Callable[[str | None, StreamId], None] | None = None
        #: Awaited with (session id, message) for each message meant for a GET stream.
        self.on_standalone: Callable[[str, JSONRPCMessage], Awaitable[None]] | None = None
        #: Awaited with (session id, stream id, event id, message) for every stored event.
        self.on_stored: Callable[[str, StreamId, EventId, JSONRPCMessage | None],
                                 Awaitable[None]] | None = None
        #: Put before every event id (a replica's own, so ids never collide across replicas).
        self.id_prefix = ""

    def __len__(self) -> int:
        return len(self._events)

    @property
    def streams(self) -> int:
        return len(self._streams)

    def view(self) -> SessionEvents:
        return SessionEvents(self)

    def bind(self, view: SessionEvents, session_id: str) -> None:
        """The session manager assigned ``session_id`` to the session writing through ``view``."""
        view.session_id = session_id
        self._sessions[session_id] = view

    def mint_id(self) -> EventId:
        """A fresh event id, stored nowhere: the priming event of a stream whose answer
        leaves in the same write (nobody can resume a stream that was already answered)."""
        return f"{self.id_prefix}{next(self._ids)}"

    def session_view(self, session_id: str) -> SessionEvents | None:
        """The view the session ``session_id`` writes through, if it has one."""
        return self._sessions.get(session_id)

    def add(self, owner: SessionEvents, stream_id: StreamId, message: JSONRPCMessage | None
            ) -> EventId:
        event_id = f"{self.id_prefix}{next(self._ids)}"
        key = (owner, stream_id)
        size = len(pydantic_core.to_json(message)) if isinstance(
            message, JSONRPCResponse | JSONRPCError) else 0
        self._events[event_id] = (key, message, size)
        self.bytes += size
        self._streams.setdefault(key, deque()).append(event_id)
        while len(self._events) > self.max_events or (
                self.bytes > self.max_bytes and len(self._events) > 1):
            _, (old_key, _, old_size) = self._events.popitem(last=False)
            self.bytes -= old_size
            ids = self._streams[old_key]
            ids.popleft()  # events leave in the order they came: it is the stream's first
            if not ids:
                del self._streams[old_key]
        return event_id

    def _drop_stream(self, key: _Key) -> None:
        for event_id in self._streams.pop(key, ()):
            found = self._events.pop(event_id, None)
            if found is not None:
                self.bytes -= found[2]

    def delivered(self, session_id: str, stream_id: StreamId) -> None:
        """A stream ended with its answer sent: nobody will resume it, drop its events."""
        view = self._sessions.get(session_id)
        if view is not None:
            self._drop_stream((view, stream_id))

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

    def stream_events(self, session_id: str, stream_id: StreamId
                      ) -> list[tuple[EventId, JSONRPCMessage | None]]:
        """The events still stored of one stream of ``session_id``, oldest first."""
        view = self._sessions.get(session_id)
        if view is None:
            return []
        return [(eid, self._events[eid][1]) for eid in self._streams.get((view, stream_id), ())]

    def forget(self, owner: SessionEvents) -> None:
        """Drop every event of a session that has ended."""
        if owner.session_id is not None:
            self._sessions.pop(owner.session_id, None)
        for key in [k for k in self._streams if k[0] is owner]:
            self._drop_stream(key)
