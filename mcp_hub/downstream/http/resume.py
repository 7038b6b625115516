"""Dropped Streamable HTTP clients: resume within a grace window, or the call is cancelled.

A client whose POST response stream drops mid-call (its process killed, a
laptop lid closed, a proxy timeout) sends no DELETE and no cancel. The hub
notices the stream ended before the answer was sent and starts a grace window
(``hub.http.resume_grace_seconds``, 30 s by default):

- the client reconnects with ``GET /mcp`` and ``Last-Event-ID`` inside the
  window: the window closes and it receives what it missed, the answer
  included, from the bounded event store (:mod:`.event_store`);
- the window passes: the call is cancelled (the upstream receives
  ``notifications/cancelled``);
- the session ends (``DELETE``, idle expiry, shutdown): its calls are cancelled
  at once.

:class:`ResumableSessions` (a part of the session manager,
:mod:`~mcp_hub.downstream.http.session_manager`) gives each session its own view
of the shared store and reports session ends; :class:`DroppedStreamWatcher` is the ASGI layer
that sees a response stream end early; :class:`Resumption` keeps the windows.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import anyio.abc
from mcp.server.streamable_http import EventStore, StreamableHTTPServerTransport
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_hub.downstream.http.body import request_body
from mcp_hub.downstream.http.event_store import BoundedEventStore, SessionEvents
from mcp_hub.hub.open_calls import OpenCalls

if TYPE_CHECKING:
    from mcp_hub.downstream.replicas.event_mirror import EventMirror

__all__ = ["DroppedStreamWatcher", "ResumableSessions", "Resumption"]

logger = logging.getLogger(__name__)

_Key = tuple[str, str]


class Resumption:
    """Grace windows of dropped streams; cancels the calls nobody comes back for."""

    def __init__(self, events: BoundedEventStore, calls: OpenCalls, grace: float) -> None:
        self.events = events
        self.calls = calls
        self.grace = grace
        self._windows: dict[_Key, anyio.CancelScope] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        events.on_replay = self.resumed
        #: Copies dropped streams to the shared store, when replicas share one.
        self.mirror: EventMirror | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Keep the windows' timers while serving (the HTTP app's lifespan)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield
            finally:
                self._tg = None
                tg.cancel_scope.cancel()

    def stats(self) -> dict[str, int | float]:
        """For ``/status.json``: the event store's use and bound, the open windows."""
        return {"events": len(self.events), "max_events": self.events.max_events,
                "bytes": self.events.bytes, "max_bytes": self.events.max_bytes,
                "streams": self.events.streams, "grace_windows": len(self._windows),
                "grace_seconds": self.grace}

    def dropped(self, session_id: str, stream_id: str) -> None:
        """A response stream ended before its answer: open its grace window."""
        key = (session_id, stream_id)
        if key not in self.calls or key in self._windows or self._tg is None:
            return
        scope = anyio.CancelScope()
        self._windows[key] = scope
        self._tg.start_soon(self._expire, key, scope)

    def resumed(self, session_id: str | None, stream_id: str) -> None:
        """The client came back for the stream: its window closes."""
        if session_id is None:
            return
        scope = self._windows.pop((session_id, stream_id), None)
        if scope is not None:
            scope.cancel()

    async def _expire(self, key: _Key, scope: anyio.CancelScope) -> None:
        with scope:
            await anyio.sleep(self.grace)
            if self._windows.get(key) is scope:
                del self._windows[key]
                self.calls.abandon(*key, why=f"its client did not come back within "
                                             f"{self.grace:g} s of its stream dropping")

    @property
    def windows(self) -> set[_Key]:
        """The (session, stream) pairs whose grace window is open."""
        return set(self._windows)

    def session_ended(self, session_id: str) -> None:
        for key in [k for k in self._windows if k[0] == session_id]:
            self._windows.pop(key).cancel()
        if self.mirror is not None:
            self.mirror.finished(session_id)
        self.calls.abandon_session(session_id, "its session ended")


class ResumableSessions:
    """One session manager's part of the resumption: each session its own view of the store.

    The SDK hands the manager's ``event_store`` to each session's transport as it
    creates it; the manager answers that with :meth:`view`, a fresh view, so every
    session gets its own (and a replay cannot cross sessions). :meth:`admitted`
    binds that view to the session's final id, :meth:`discarded` forgets it and
    reports the session's end.
    """

    def __init__(self, resumption: Resumption) -> None:
        self._resumption = resumption
        self._views: dict[str, SessionEvents] = {}
        self._fresh: SessionEvents | None = None

    def view(self) -> EventStore:
        """A new view of the shared store, for the session being admitted."""
        view = self._resumption.events.view()
        self._fresh = view
        return view

    def admitted(self, transport: StreamableHTTPServerTransport | None) -> None:
        """The admission ended (``transport`` None: refused): bind its view to the id."""
        view, self._fresh = self._fresh, None
        if transport is not None and view is not None and transport.mcp_session_id:
            self._resumption.events.bind(view, transport.mcp_session_id)
            view.transport = transport
            self._views[transport.mcp_session_id] = view

    def discarded(self, session_id: str) -> None:
        """The session ended: its view goes, its open calls are cancelled."""
        view = self._views.pop(session_id, None)
        if view is not None:
            self._resumption.events.forget(view)
        self._resumption.session_ended(session_id)


#: The first of the keys that tell JSON-RPC messages apart, in an SSE event's data:
#: messages are written with ``jsonrpc`` and ``id`` first, then ``method`` (a request or
#: notification) or ``result`` / ``error`` (an answer), before any nested content.
_KIND = re.compile(rb'data: \{[^\n]*?"(method|result|error)"')


def _message_kind(body: bytes) -> bytes | None:
    """``method``, ``result`` or ``error`` for the last SSE event of ``body`` carrying a
    JSON-RPC message, None when it carries none."""
    start = body.rfind(b"data: {")
    if start < 0:
        return None
    found = _KIND.match(body, start)
    return found.group(1) if found is not None else None


def _request_id(body: bytes) -> str | None:
    """The id of the JSON-RPC request a POST body carries (None for anything else)."""
    if b'"id"' not in body or b'"method"' not in body:
        return None
    try:
        raw = json.loads(body)
    except ValueError:
        return None
    if not isinstance(raw, dict) or "method" not in raw or raw.get("id") is None:
        return None
    return str(raw["id"])


class DroppedStreamWatcher:
    """Notices a Streamable HTTP response stream that ended before its answer was sent.

    Nothing of a session's stored events is looked at or dropped for a request
    that may not act on that session (``may_use``: its owner's credential), nor
    for one the session manager refused (an answer of 400 or more).
    """

    def __init__(self, app: ASGIApp, *, resumption: Resumption,
                 may_use: Callable[[str, Scope], bool] | None = None) -> None:
        self.app = app
        self.resumption = resumption
        #: (session id, scope) -> whether the request may act on the session.
        self.may_use = may_use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope.get("method")
        if (scope["type"] != "http" or method not in ("POST", "GET")
                or not scope.get("path", "").endswith("/mcp")):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        session_id = headers.get("mcp-session-id")
        if session_id is None or (self.may_use is not None
                                  and not self.may_use(session_id, scope)):
            await self.app(scope, receive, send)
            return
        stream_id: str | None = None
        if method == "GET":
            last = headers.get("last-event-id")
            if last:
                stream_id = self.resumption.events.stream_of(session_id, last)
        else:
            stream_id = _request_id(request_body(scope))
        if stream_id is None:
            await self.app(scope, receive, send)
            return
        state = {"stream": False, "ended": False, "refused": False, "answered": False}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["refused"] = int(message.get("status", 200)) >= 400
                kinds = [v for k, v in message.get("headers", []) if k.lower() == b"content-type"]
                state["stream"] = any(v.startswith(b"text/event-stream") for v in kinds)
            elif message["type"] == "http.response.body":
                # Only a stream's last event matters (a JSON body is its answer); a
                # priming event carries no JSON.
                kind = _message_kind(message.get("body", b"")) if state["stream"] else None
                if kind is not None:
                    state["answered"] = kind != b"method"
                if not message.get("more_body", False):
                    state["ended"] = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if state["refused"]:
                pass  # a refused request changes nothing of the session's streams
            elif state["stream"] and (not state["ended"] or not state["answered"]
                                      or (session_id, stream_id) in self.resumption.calls):
                # Dropped, or closed by the hub before the answer for the client to poll
                # (an upstream polls): either way the answer waits for a resume. The
                # call may have ended meanwhile (its answer then is in the store), so
                # what counts is whether the stream's last event was the answer.
                self.resumption.dropped(session_id, stream_id)
                mirror = self.resumption.mirror
                if mirror is not None and (session_id, stream_id) in self.resumption.windows:
                    with anyio.CancelScope(shield=True):
                        await mirror.dropped(session_id, stream_id)
            elif state["ended"]:
                self.resumption.events.delivered(session_id, stream_id)
