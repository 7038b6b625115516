"""Resuming a dropped stream on another replica: its events mirrored to the shared store.

The resumability event store (:mod:`.event_store`) is in memory, per replica.
Behind a round-robin load balancer the client that reconnects with
``Last-Event-ID`` usually reaches another replica than the one that served the
stream. So, with a shared store, when a response stream drops mid-call the
replica serving it copies that stream's events to the store, and keeps
copying what the stream still produces (the answer, when the call ends) while
its grace window is open. Nothing is written for streams that do not drop.

A replica receiving ``GET`` with a ``Last-Event-ID`` it does not hold, for a
session of the caller's own credential, replays the mirrored events after it
from the store and ends the response; a client that has not got its answer
yet reconnects with its new last event id. The serving replica is told over
the bus, so the call is not cancelled at the end of its grace window.
Event ids carry the replica's id (``<replica>-<n>``), so they never collide.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pydantic_core
from mcp.types import JSONRPCMessage
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.downstream.http.event_store import BoundedEventStore
from mcp_hub.downstream.replicas.sealed_session import session_credential
from mcp_hub.state import StateBackend, StateUnavailable

__all__ = ["EventMirror", "MirroredReplay"]

logger = logging.getLogger(__name__)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _order(event_id: str) -> int:
    tail = event_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


class EventMirror:
    """Copies the events of dropped streams to the shared store; reads them back."""

    def __init__(self, state: StateBackend, events: BoundedEventStore, ttl: float) -> None:
        self.state = state
        self.events = events
        self.ttl = max(ttl, 1.0) + 60.0
        self._mirrored: set[tuple[str, str]] = set()
        self.mirrored_events = 0
        self.replayed = 0
        events.on_stored = self.stored

    async def dropped(self, session_id: str, stream_id: str) -> None:
        """A stream dropped before its answer: copy what it sent so far, and what follows."""
        key = (session_id, stream_id)
        if key in self._mirrored:
            return
        self._mirrored.add(key)
        for event_id, message in self.events.stream_events(session_id, stream_id):
            await self._push(session_id, stream_id, event_id, message)

    async def stored(self, session_id: str, stream_id: str, event_id: str,
                     message: JSONRPCMessage | None) -> None:
        if (session_id, stream_id) in self._mirrored:
            await self._push(session_id, stream_id, event_id, message)

    def finished(self, session_id: str) -> None:
        """The session ended here: stop mirroring its streams."""
        self._mirrored = {k for k in self._mirrored if k[0] != session_id}

    async def _push(self, session_id: str, stream_id: str, event_id: str,
                    message: JSONRPCMessage | None) -> None:
        body = {"s": _digest(session_id), "t": stream_id,
                "m": None if message is None else json.loads(pydantic_core.to_json(
                    message, by_alias=True, exclude_none=True))}
        try:
            await self.state.put(f"event:{event_id}", json.dumps(body).encode(), self.ttl)
            await self.state.set_add(f"events:{_digest(session_id)}:{stream_id}", event_id,
                                     self.ttl)
        except StateUnavailable:
            logger.warning("an event of a dropped stream was not mirrored: the state store is "
                           "unavailable; the client can resume only on this replica")
            return
        self.mirrored_events += 1

    async def after(self, session_id: str, last_event_id: str
                    ) -> tuple[str, list[tuple[str, dict[str, Any]]]] | None:
        """(stream id, events after ``last_event_id``) of ``session_id``, if mirrored."""
        try:
            raw = await self.state.get(f"event:{last_event_id}")
            if raw is None:
                return None
            found = json.loads(raw)
            if found.get("s") != _digest(session_id):
                return None  # another session's event id replays nothing
            stream = str(found["t"])
            ids = await self.state.set_members(f"events:{_digest(session_id)}:{stream}")
            later = sorted((i for i in ids if _order(i) > _order(last_event_id)), key=_order)
            out: list[tuple[str, dict[str, Any]]] = []
            for event_id in later:
                item = await self.state.get(f"event:{event_id}")
                message = json.loads(item)["m"] if item is not None else None
                if isinstance(message, dict):
                    out.append((event_id, message))
        except StateUnavailable:
            return None
        return stream, out


class MirroredReplay:
    """Answers ``GET`` + ``Last-Event-ID`` from the mirror when this replica lacks the event."""

    def __init__(self, app: ASGIApp, *, mirror: EventMirror, prefix: str,
                 owns: Callable[[str, str, str], bool],
                 resumed: Callable[[str, str], Any]) -> None:
        self.app = app
        self.mirror = mirror
        self.prefix = prefix
        self.owns = owns
        self.resumed = resumed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET" or not scope.get(
                "path", "").endswith("/mcp"):
            await self.app(scope, receive, send)
            return
        headers = {k: v.decode("latin-1") for k, v in scope["headers"]}
        last = headers.get(b"last-event-id")
        sid = headers.get(b"mcp-session-id")
        if (not last or not sid or last.startswith(self.prefix)
                or not self.owns(sid, session_credential(scope), scope["path"])):
            await self.app(scope, receive, send)
            return
        found = await self.mirror.after(sid, last)
        if found is None:
            await self.app(scope, receive, send)
            return
        stream, events = found
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
            (b"mcp-session-id", sid.encode("latin-1"))]})
        for event_id, message in events:
            data = json.dumps(message, separators=(",", ":"))
            chunk = f"id: {event_id}\nevent: message\ndata: {data}\n\n".encode()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        self.mirror.replayed += 1
        await self.resumed(sid, stream)
