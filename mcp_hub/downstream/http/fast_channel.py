"""One HTTP fast-path call's way back to its client (see :mod:`.http_fastpath`).

With ``[hub.http] answers = "sse"`` (the default) the answer is an SSE stream
that opens with a priming event — an event id, ``retry`` and empty data, for a
2025-11-25 or later client — as the SDK path's streams do. An answer ready at
once leaves with its headers, priming event and result in one write, and its
priming event is stored nowhere (nobody resumes a stream that was answered in
the write that opened it). With ``"json"`` the answer is a plain JSON body,
unless the call needs the client before it ends: then the response becomes an
SSE stream — log messages, progress and the hub's own requests (sampling,
elicitation, roots) as events, the result as the last one. The client's answers
to those requests come back as POSTs that the fast path hands to
:meth:`HttpChannel` via ``fast.pending``.

When the upstream closes its stream of the call mid-call (SSE polling,
:mod:`mcp_hub.upstream.polling`), :meth:`HttpChannel.close_stream` closes the
client's stream in turn after a stored priming event; what the call sends after
that — its answer included — goes through the session's SDK transport, which
stores it in the event store and hands it to the client's ``GET`` with
``Last-Event-ID`` (:mod:`.resume`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp.types import (
    INTERNAL_ERROR,
    ClientCapabilities,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from starlette.types import Send

from mcp_hub.compat.sdk_http import transport_write_stream
from mcp_hub.downstream.call_context import JsonRpcDownstream, RelayCallContext
from mcp_hub.downstream.fast_call import encode_message
from mcp_hub.downstream.http.event_store import BoundedEventStore
from mcp_hub.downstream.stdio.fastpath import _Pending
from mcp_hub.protocol.log_levels import client_log_level


class ChannelSession(Protocol):
    """What a channel needs of the fast path's session (``http_fastpath.FastSession``)."""

    @property
    def sid(self) -> str: ...
    @property
    def connection(self) -> Any: ...
    @property
    def version(self) -> str: ...
    @property
    def transport(self) -> StreamableHTTPServerTransport | None: ...


@dataclass(frozen=True, slots=True)
class StreamOpening:
    """How a fast-path call's SSE stream opens (``[hub.http] answers``, ``sse_retry_ms``)."""

    #: Answer with an SSE stream even when the answer is ready at once (``answers = "sse"``).
    sse: bool
    #: The priming event's ``retry`` in ms; 0: no ``retry`` field.
    retry_ms: int
    #: The event store priming events are stored in (for a resume), None: no priming events.
    store: BoundedEventStore | None
    #: Told (session id, request id) when a stream is closed before its answer: opens the
    #: call's grace window (``[hub.http] resume_grace_seconds``, :mod:`.resume`).
    dropped: Callable[[str, str], None] | None = None


class ChannelOwner(Protocol):
    """What a channel needs of the fast path (``http_fastpath.HttpFastPath``): the hub,
    the ids of the requests it sends the client, and where their answers wait."""

    @property
    def hub(self) -> Any: ...
    @property
    def pending(self) -> dict[tuple[str, str], _Pending]: ...

    def next_request_id(self) -> str:
        """A fresh id for a request to the client."""
        ...

__all__ = ["PRIMING_SINCE", "HttpChannel", "StreamOpening", "priming_event", "send_accepted",
           "send_json", "send_json_parts", "send_stream", "send_stream_parts", "sse_event"]

logger = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 600.0
_JSON_HEADERS = [(b"content-type", b"application/json")]
_GZIP_HEADERS = [(b"content-encoding", b"gzip"), (b"vary", b"accept-encoding")]
#: The first protocol revision whose clients read a priming event (an event with empty data).
PRIMING_SINCE = "2025-11-25"
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no")]


async def send_json(send: Send, sid: str, body: bytes, gzipped: bool = False) -> None:
    """A 200 with a JSON body (``gzipped``: the body is its gzip encoding)."""
    await send_json_parts(send, sid, (body,), gzipped)


async def send_json_parts(send: Send, sid: str, parts: tuple[bytes, ...],
                          gzipped: bool = False) -> None:
    """A 200 whose JSON body is ``parts`` joined, sent part by part (nothing is copied)."""
    await send({"type": "http.response.start", "status": 200, "headers": [
        *_JSON_HEADERS, (b"content-length", str(sum(map(len, parts))).encode()),
        (b"mcp-session-id", sid.encode("latin-1")), *(_GZIP_HEADERS if gzipped else ())]})
    last = len(parts) - 1
    for n, part in enumerate(parts):
        await send({"type": "http.response.body", "body": part, "more_body": n < last})


def sse_event(parts: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """A JSON-RPC message (its compact JSON in ``parts``) as one SSE ``message`` event."""
    return (b"event: message\r\ndata: ", *parts, b"\r\n\r\n")


def priming_event(event_id: str, retry_ms: int) -> bytes:
    """The event that opens a resumable stream: its id (the cursor), ``retry``, no data."""
    retry = b"retry: %d\r\n" % retry_ms if retry_ms else b""
    return b"id: " + event_id.encode() + b"\r\n" + retry + b"data: \r\n\r\n"


def _stream_start(sid: str, length: int | None) -> dict[str, Any]:
    """The start of an SSE answer; a stream sent whole has its length (no chunked framing)."""
    sized = [(b"content-length", str(length).encode())] if length is not None else []
    return {"type": "http.response.start", "status": 200, "headers": [
        *_SSE_HEADERS, *sized, (b"mcp-session-id", sid.encode("latin-1"))]}


async def send_stream(send: Send, sid: str, parts: tuple[bytes, ...], more: bool = False) -> None:
    """A 200 SSE stream whose first bytes are ``parts`` joined (the whole stream unless ``more``)."""
    body = b"".join(parts)
    await send(_stream_start(sid, None if more else len(body)))
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def send_stream_parts(send: Send, sid: str, parts: tuple[bytes, ...]) -> None:
    """A 200 SSE stream that is ``parts``, sent part by part (nothing is copied)."""
    await send(_stream_start(sid, sum(map(len, parts))))
    last = len(parts) - 1
    for n, part in enumerate(parts):
        await send({"type": "http.response.body", "body": part, "more_body": n < last})


async def send_accepted(send: Send) -> None:
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


class HttpChannel(JsonRpcDownstream):
    """One fast-path call's way back to the client: a JSON body, or an SSE stream once needed."""

    def __init__(self, fast: ChannelOwner, session: ChannelSession, send: Send,
                 opening: StreamOpening | None = None) -> None:
        self.fast = fast
        self.hub = fast.hub
        self.session = session
        self._send = send
        self.opening = opening or StreamOpening(sse=False, retry_ms=0, store=None)
        self.streaming = False
        #: The client's stream was closed for it to resume (the upstream polls): what
        #: follows goes through the session's SDK transport and its event store.
        self.polled = False
        self.rid: Any = None
        params = session.connection.client_params
        self.capabilities: ClientCapabilities | None = session.connection.client_capabilities
        info = getattr(params, "client_info", None)
        self.client_name: str | None = getattr(info, "name", None)

    def context(self, rid: Any, name: str, meta: dict[str, Any] | None = None,
                headers: Mapping[str, str] | None = None) -> RelayCallContext:
        """The call's context: the one relay context of every transport, over this channel.

        ``meta`` and ``headers`` carry the client's trace context, as on the SDK path.
        """
        self.rid = rid
        return RelayCallContext(self, tool_name=name, request_id=rid, progress_token=None,
                                client_capabilities=self.capabilities, client_name=self.client_name,
                                session=self.session.connection, hub=self.hub, meta=meta,
                                headers=headers, transport="tcp",
                                protocol_version=self.session.version, session_id=self.session.sid)

    # the Downstream of mcp_hub.downstream.call_context
    def log_threshold(self) -> str | None:
        return client_log_level(getattr(self.session.connection, "state", None))

    @property
    def resumable(self) -> bool:
        """Whether this call's stream opens with a priming event its client can resume from."""
        return (self.opening.store is not None and self.session.version >= PRIMING_SINCE
                and self.rid is not None)

    async def _priming(self, stored: bool) -> bytes:
        """The priming event's bytes (empty when the stream is not resumable). ``stored``:
        kept in the session's events, for a stream that may end before its answer."""
        store = self.opening.store
        if store is None or not self.resumable:
            return b""
        view = store.session_view(self.session.sid) if stored else None
        if stored and view is None:
            return b""  # nothing to resume from: no cursor to offer
        event_id = (await view.store_event(str(self.rid), None) if view is not None
                    else store.mint_id())
        return priming_event(event_id, self.opening.retry_ms)

    async def _open(self, parts: tuple[bytes, ...], *, stored: bool, more: bool) -> None:
        """Start the SSE stream: headers, the priming event, then ``parts``."""
        self.streaming = True
        await send_stream(self._send, self.session.sid, (await self._priming(stored), *parts), more)

    async def _event(self, message: dict[str, Any]) -> None:
        if self.polled:
            await self._later(message)
            return
        data = sse_event((encode_message(message),))
        if not self.streaming:
            await self._open(data, stored=True, more=True)
            return
        await self._send({"type": "http.response.body", "body": b"".join(data), "more_body": True})

    async def _later(self, message: dict[str, Any]) -> None:
        """After a poll close: through the SDK transport, which stores the message and
        sends it on the client's resumed stream (a response finds it by its id, the rest
        by the call's request id)."""
        transport = self.session.transport
        stream = transport_write_stream(transport) if transport is not None else None
        if stream is None:
            return  # the session has ended: nobody will resume
        parsed = jsonrpc_message_adapter.validate_python(message, by_name=False)
        metadata = (ServerMessageMetadata(related_request_id=self.rid)
                    if isinstance(parsed, JSONRPCNotification | JSONRPCRequest) else None)
        try:
            await stream.send(SessionMessage(parsed, metadata=metadata))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the session ended before a polled call's answer was stored")

    async def close_stream(self) -> None:
        """The upstream closed its stream of this call to be polled: close the client's
        in turn, after a stored priming event (with ``retry``) it resumes from. Nothing is
        done for a client that cannot resume (before 2025-11-25, no event store)."""
        if self.polled or not self.resumable:
            return
        self.polled = True
        if self.opening.dropped is not None:  # a client that never resumes: cancelled later
            self.opening.dropped(self.session.sid, str(self.rid))
        try:
            if not self.streaming:
                await self._open((), stored=True, more=False)
            else:
                cursor = await self._priming(stored=True)  # a cursor after what was sent
                await self._send({"type": "http.response.body", "body": cursor, "more_body": False})
        except OSError:
            logger.debug("the client went away as its stream was closed", exc_info=True)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._event({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        """Send a server-to-client request on this call's stream; wait (bounded) for its answer."""
        rid = self.fast.next_request_id()
        key = (self.session.sid, rid)
        pending = self.fast.pending[key] = _Pending()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._event(message)
            with anyio.fail_after(_REQUEST_TIMEOUT):
                await pending.done.wait()
        except BaseException:
            if not pending.done.is_set():
                with anyio.move_on_after(2, shield=True):
                    await self.notify("notifications/cancelled",
                                      {"requestId": rid, "reason": "the request was abandoned"})
            raise
        finally:
            self.fast.pending.pop(key, None)
        if pending.error is not None:
            raise MCPError(int(pending.error.get("code", INTERNAL_ERROR)),
                           str(pending.error.get("message", "error")), pending.error.get("data"))
        return pending.result

    async def finish(self, message: dict[str, Any] | None) -> None:
        """The answer: a JSON body, or the last event of the stream (none if cancelled)."""
        try:
            if self.polled:  # the client's stream was closed: it resumes to get the answer
                if message is not None:
                    await self._later(message)
                return
            if not self.streaming:
                if message is None:  # cancelled before anything was sent: an empty stream
                    self.streaming = True
                    await self._send({"type": "http.response.start", "status": 200,
                                      "headers": _SSE_HEADERS})
                elif self.opening.sse:  # headers, priming event and answer in one write
                    await self._open(sse_event((encode_message(message),)), stored=False,
                                     more=False)
                    return
                else:
                    await send_json(self._send, self.session.sid, encode_message(message))
                    return
            elif message is not None:
                await self._event(message)
            await self._send({"type": "http.response.body", "body": b""})
        except OSError:
            logger.debug("the client went away before its answer was written", exc_info=True)
