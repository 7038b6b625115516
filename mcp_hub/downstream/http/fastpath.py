"""The HTTP fast path: one JSON-RPC request on a live session, answered with a plain JSON body.

The SDK answers every Streamable HTTP POST with an SSE stream and runs the
message through its dispatcher, runner and per-request memory streams; for a
proxied call that is most of the CPU the hub spends. This ASGI layer, inside
the guards (Host, Origin, auth, rate limit, body limit, drain) and outside the
SDK transport, answers a POST itself when

* it is for ``/mcp`` or ``/p/NAME/mcp`` and names a live handshake-era session
  that has finished its handshake (:func:`live_session`);
* it accepts ``application/json`` and ``text/event-stream`` and carries
  ``Content-Type: application/json`` (what the SDK transport demands too);
* its body is one JSON-RPC request of ``tools/call`` (without a progress
  token), ``tools/list``, ``prompts/list``, ``resources/list``,
  ``resources/templates/list`` or ``ping``.

Anything else goes to the SDK unchanged, so the choice is made per request.
A call runs through the common call path (:mod:`.fast_call`, shared with the
stdio fast path) and lists are written from prepared bytes
(:mod:`.prepared_lists`).

A call that turns out to need the client mid-call — an upstream log message, a
sampling, elicitation or roots request — switches its answer to an SSE stream
before anything was sent: the side traffic goes out as events on that stream,
the client's answers to the hub's requests (POSTed as JSON-RPC responses) are
picked up here, and the result is the last event, exactly what the SDK path
would have sent. ``notifications/cancelled`` for a fast-path call cancels it,
and so does the client closing the connection.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.compat.sdk_http import HookedSessionManager, holding
from mcp_hub.downstream.fast_call import call_message, encode_message
from mcp_hub.downstream.http.body import request_body
from mcp_hub.downstream.http.disconnects import watch_disconnect
from mcp_hub.downstream.http.fast_channel import (
    PRIMING_SINCE,
    HttpChannel,
    StreamOpening,
    priming_event,
    send_accepted,
    send_json,
    send_json_parts,
    send_stream,
    send_stream_parts,
    sse_event,
)
from mcp_hub.downstream.http.limits import connection_offloads
from mcp_hub.downstream.http.paced_send import paced
from mcp_hub.downstream.http.resume import Resumption
from mcp_hub.downstream.identity import scope_caller
from mcp_hub.downstream.jsonrpc import is_request_id
from mcp_hub.downstream.lists.gzip_answer import accepts_gzip, gzip_parts
from mcp_hub.downstream.lists.prepared import LIST_METHODS, prepared_lists
from mcp_hub.downstream.stdio.fastpath import _Pending
from mcp_hub.hub.access import Caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.plumbing.settled_heap import settled_heap

__all__ = ["FastSession", "HttpFastPath", "freeze_startup_heap", "live_session"]

logger = logging.getLogger(__name__)

_HANDSHAKE = frozenset(HANDSHAKE_PROTOCOL_VERSIONS)
#: Answers from this size on, on a connection that writes its own bytes (TLS), are written
#: one at a time (:meth:`HttpFastPath._writing_turn`); elsewhere the bulk writer sends them.
TURN_BYTES = 64 * 1024
#: The longest a large answer waits for its turn before it is written anyway.
TURN_WAIT = 0.05
#: Smaller list answers go uncompressed: gzip would save little and add a thread hop.
GZIP_MIN_BYTES = 16 * 1024


@dataclass(slots=True)
class FastSession:
    """What the fast path needs of a session: its id, SDK connection, transport and version."""

    sid: str
    connection: Any
    transport: StreamableHTTPServerTransport | None
    version: str


def live_session(hub: ServingHub, manager: HookedSessionManager, sid: str,
                 scope: Scope) -> FastSession | None:
    """The session ``sid`` of ``manager`` if the fast path may serve it, else None.

    None sends the request to the SDK path, which answers unknown sessions
    (404) and everything unusual. This is the one place that finds a session:
    a state backend that recovers sessions on any replica plugs in here.
    """
    transport = manager.transports.get(sid)
    if transport is None or transport.is_terminated:
        return None
    idle = transport.idle_scope
    if idle is not None and idle.cancel_called:
        return None
    user = scope.get("user")
    requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
    if requestor != manager.owners.get(sid):
        return None
    usable = getattr(manager, "usable", None)  # a sealed session past its lifetime
    if callable(usable) and not usable(sid):
        return None
    conn = hub.sessions.by_session_id(sid)
    version = getattr(conn, "protocol_version", None)
    if conn is None or version not in _HANDSHAKE or conn.client_params is None:
        return None
    return FastSession(sid, conn, transport, version)


def freeze_startup_heap() -> None:
    """Move everything alive after start-up (modules, the SDK's and pydantic's schemas,
    the config) out of the collector's sight: each collection then scans only what
    requests allocate, instead of the whole heap. Profiles of a busy hub showed
    the collector's pauses at about a tenth of its CPU. What arrives later (the
    catalog) is frozen once it settles (:mod:`mcp_hub.plumbing.settled_heap`)."""
    settled_heap().reset()


def _head(scope: Scope) -> str | None:
    """The session id of a POST the fast path may take (by its headers), else None."""
    sid: bytes | None = None
    accept: bytes | None = None
    ctype: bytes | None = None
    version: bytes | None = None
    for key, value in scope["headers"]:
        if key == b"mcp-session-id":
            sid = value
        elif key == b"accept":
            accept = value
        elif key == b"content-type":
            ctype = value
        elif key == b"mcp-protocol-version":
            version = value
    if sid is None or accept is None or ctype is None:
        return None
    if ctype.split(b";")[0].strip().lower() != b"application/json":
        return None
    if version is not None and version.decode("latin-1") not in _HANDSHAKE:
        return None
    kinds = {part.split(b";")[0].strip().lower() for part in accept.split(b",")}
    wild = b"*/*" in kinds
    if not (wild or kinds & {b"application/json", b"application/*"}):
        return None
    if not (wild or kinds & {b"text/event-stream", b"text/*"}):
        return None
    return sid.decode("latin-1")


class HttpFastPath:
    """The ASGI layer of the HTTP fast path (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, hub: ServingHub,
                 endpoints: dict[str, tuple[HookedSessionManager, Caller]],
                 served: dict[str, int] | None = None, bus: Any = None,
                 resumption: Resumption | None = None) -> None:
        self.app = app
        self.hub = hub
        http = hub.config.hub.http
        #: How answers open (``[hub.http] answers``, ``sse_retry_ms``); ``resumption`` has
        #: the store the SDK path resumes streams from, and the grace windows.
        self.opening = StreamOpening(
            sse=http.answers == "sse", retry_ms=http.sse_retry_ms,
            store=resumption.events if resumption is not None else None,
            dropped=resumption.dropped if resumption is not None else None)
        self.endpoints = endpoints
        self.lists = prepared_lists(hub)
        self.calls: dict[tuple[str, str], anyio.CancelScope] = {}
        self._turn = anyio.Lock()
        self.pending: dict[tuple[str, str], _Pending] = {}
        self._ids = itertools.count(1)
        #: Ids of the hub's requests to clients, unique across replicas: an answer that
        #: reached another replica comes back over the bus and must find only its call.
        self.id_prefix = f"mcp-hub-h{os.urandom(4).hex()}-"
        if bus is not None:
            bus.local_takers.append(self.take)
        #: Requests answered here, by method (for status and tests).
        self.served: dict[str, int] = served if served is not None else {}

    def next_request_id(self) -> str:
        """A fresh id for a request the fast path sends a client (unique to this process)."""
        return f"{self.id_prefix}{next(self._ids)}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoints.get(scope.get("path", "")) if scope.get("method") == "POST" else None
        sid = _head(scope) if endpoint is not None and scope["type"] == "http" else None
        session = live_session(self.hub, endpoint[0], sid, scope) if endpoint and sid else None
        if session is None or endpoint is None:
            await self.app(scope, receive, send)
            return
        # The endpoint's profile with the signed-in identity of this request, as on the SDK path.
        endpoint = (endpoint[0], scope_caller(scope, endpoint[1]))
        raw = _parse(request_body(scope))
        if raw is None or not await self._serve(raw, session, endpoint, receive, send,
                                                scope.get("headers", []),
                                                connection_offloads(scope)):
            await self.app(scope, receive, send)

    async def _serve(self, raw: dict[str, Any], session: FastSession,
                     endpoint: tuple[HookedSessionManager, Caller], receive: Receive,
                     send: Send, headers: list[tuple[bytes, bytes]], bulk: bool = False) -> bool:
        method, rid, params = raw.get("method"), raw.get("id"), raw.get("params")
        if method is None:
            return await self._answer(session, rid, raw, send)
        if method == "notifications/cancelled" and "id" not in raw:
            return await self._cancel(session, params, send)
        if not is_request_id(rid) or (params is not None and not isinstance(params, dict)):
            return False
        if method == "tools/call":
            return await self._call(session, endpoint, rid, params, receive, send, headers)
        if method not in LIST_METHODS and method != "ping":
            return False
        manager = endpoint[0]
        touch = getattr(manager, "pool", None)
        if touch is not None:
            touch.touch(session.sid)
        if method != "ping":
            # One list starts per turn of the loop: twenty re-lists arriving together
            # would otherwise run their first steps (span, page, parts) in one turn.
            await self.lists.turn()
        with holding(session.transport):
            if method == "ping":
                parts: tuple[bytes, ...] = (
                    b'{"jsonrpc":"2.0","id":' + _encode_id(rid) + b',"result":{}}',)
                gzipped = False
            else:
                cursor = (params or {}).get("cursor")
                if cursor is not None and not isinstance(cursor, str):
                    return False
                parts, gzipped = await self._list(method, session, endpoint[1], rid, cursor,
                                                  (params or {}).get("_meta"), headers)
            self.served[method] = self.served.get(method, 0) + 1
            if self.opening.sse and not gzipped:
                await self._send_stream(send, session, rid, parts, bulk)
            elif sum(map(len, parts)) < TURN_BYTES:
                await send_json(send, session.sid, b"".join(parts), gzipped)
            elif bulk:  # as they are, without a copy: the bulk writer's thread sends them
                await send_json_parts(send, session.sid, parts, gzipped)
            else:
                async with self._writing_turn():  # a large list in pieces, one list at a time
                    await send_json(paced(send), session.sid, b"".join(parts), gzipped)
        return True

    async def _send_stream(self, send: Send, session: FastSession, rid: Any,
                           parts: tuple[bytes, ...], bulk: bool) -> None:
        """An answer ready at once as an SSE stream (``answers = "sse"``): its priming event
        (stored nowhere: the answer leaves with it) and the answer as one event."""
        store = self.opening.store
        head = (priming_event(store.mint_id(), self.opening.retry_ms)
                if store is not None and session.version >= PRIMING_SINCE else b"")
        stream = (head, *sse_event(parts))
        if sum(map(len, parts)) < TURN_BYTES:
            await send_stream(send, session.sid, stream)
        elif bulk:
            await send_stream_parts(send, session.sid, stream)
        else:
            async with self._writing_turn():
                await send_stream(paced(send), session.sid, stream)

    @asynccontextmanager
    async def _writing_turn(self) -> AsyncIterator[None]:
        """One large answer is written at a time, waiting at most ``TURN_WAIT`` seconds.

        Twenty clients re-listing at once after a ``list_changed`` would otherwise each
        have a piece to write in every turn of the event loop, and a call that arrives
        meanwhile waits for all twenty pieces at each of its steps. Taking turns, each
        loop turn has one list's piece and the calls. The wait is bounded, so a client
        that stops reading holds the others back by ``TURN_WAIT`` at most.
        """
        got = False
        with anyio.move_on_after(TURN_WAIT):
            await self._turn.acquire()
            got = True
        try:
            yield
        finally:
            if got:
                self._turn.release()

    async def _list(self, method: str, session: FastSession, caller: Caller, rid: Any,
                    cursor: str | None, meta: Any = None, headers: Any = None
                    ) -> tuple[tuple[bytes, ...], bool]:
        """The answer of one list request in parts, and whether it is gzip-encoded.

        A result of ``GZIP_MIN_BYTES`` or more goes gzip-encoded to a client that
        accepts gzip (``[hub.http] compress_lists``), built around the result's
        deflated bytes, which are made once per preparation (:mod:`.gzip_answer`).
        """
        try:
            with self.hub.telemetry.request(  # its span (mcp_hub.telemetry)
                    method, None, request_id=rid, meta=meta, headers=headers, transport="tcp",
                    protocol_version=session.version, session_id=session.sid):
                result = await self.lists.result(LIST_METHODS[method], caller, session.version,
                                                 cursor)
        except MCPError as exc:
            return (encode_message({"jsonrpc": "2.0", "id": rid, "error": exc.error.model_dump(
                by_alias=True, mode="json", exclude_none=True)}),), False
        prefix = b'{"jsonrpc":"2.0","id":' + _encode_id(rid) + b',"result":'
        if (len(result) >= GZIP_MIN_BYTES and self.hub.config.hub.http.compress_lists
                and headers and accepts_gzip(headers)):
            return gzip_parts(prefix, await self.lists.deflated(result), b"}"), True
        return (prefix, result, b"}"), False

    async def _answer(self, session: FastSession, rid: Any, raw: dict[str, Any], send: Send) -> bool:
        """A client's answer to a request the fast path sent: 202, and the call goes on."""
        if not self._resolve(session.sid, rid, raw):
            return False
        await send_accepted(send)
        return True

    async def _cancel(self, session: FastSession, params: Any, send: Send) -> bool:
        if not self._cancel_call(session.sid, params):
            return False
        await send_accepted(send)
        return True

    def _resolve(self, sid: str, rid: Any, raw: dict[str, Any]) -> bool:
        pending = self.pending.pop((sid, rid), None) if isinstance(rid, str) else None
        if pending is None:
            return False
        pending.result = raw.get("result")
        error = raw.get("error")
        pending.error = error if isinstance(error, dict) else None
        pending.done.set()
        return True

    def _cancel_call(self, sid: str, params: Any) -> bool:
        target = params.get("requestId") if isinstance(params, dict) else None
        scope = self.calls.get((sid, str(target))) if is_request_id(target) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    def take(self, sid: str, raw: dict[str, Any]) -> bool:
        """A client message another replica received for session ``sid`` (over the replica
        bus): True when it answers a request of a call running here, or cancels one."""
        method = raw.get("method")
        if method is None:
            return self._resolve(sid, raw.get("id"), raw)
        return method == "notifications/cancelled" and self._cancel_call(sid, raw.get("params"))

    async def _call(self, session: FastSession, endpoint: tuple[HookedSessionManager, Caller],
                    rid: Any, params: Any, receive: Receive, send: Send,
                    headers: list[tuple[bytes, bytes]]) -> bool:
        if not isinstance(params, dict):
            return False
        name, arguments, meta = params.get("name"), params.get("arguments", {}), params.get("_meta")
        if arguments is None:
            arguments = {}
        if (not isinstance(name, str) or not isinstance(arguments, dict)
                or (meta is not None and (not isinstance(meta, dict) or "progressToken" in meta))):
            return False  # a progress token needs the stream: the SDK path serves it
        if "task" in params:
            return False  # a task-augmented call: the SDK path (mcp_hub.hub.tasks)
        key = (session.sid, str(rid))
        if key in self.calls:
            return False
        manager, caller = endpoint
        touch = getattr(manager, "pool", None)
        if touch is not None:
            touch.touch(session.sid)
        channel = HttpChannel(self, session, send, self.opening)
        cancel = self.calls[key] = anyio.CancelScope()
        message: dict[str, Any] | None = None
        try:
            # A stream closed for the client to poll (the upstream polls) is left on purpose.
            with holding(session.transport), \
                    self.hub.open_calls.track(session.sid, rid) as tracked, \
                    watch_disconnect(receive, cancel, unless=lambda: channel.polled), cancel:
                call = channel.context(rid, name, meta, Headers(raw=headers))
                message = await call_message(self.hub, caller, session.version, rid, name,
                                             arguments, call)
            if tracked.cancel_called and message is None:
                message = {"jsonrpc": "2.0", "id": rid, "error": {
                    "code": CONNECTION_CLOSED, "message": "the session ended; the call was cancelled"}}
        finally:
            self.calls.pop(key, None)
        self.served["tools/call"] = self.served.get("tools/call", 0) + 1
        await channel.finish(message)
        return True


def _parse(body: bytes) -> dict[str, Any] | None:
    if not body.startswith(b"{"):
        return None  # a batch or not JSON: the SDK path answers it
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
        return None
    return raw


def _encode_id(rid: Any) -> bytes:
    return json.dumps(rid).encode()
