"""The lean ``tools/call``: one request on a live upstream session, without the SDK's
per-request machinery.

``ClientSession.send_request`` builds and dumps the request model twice, opens an
OpenTelemetry span of its own, makes a memory stream per request for the answer and
validates the answer three times (the JSON-RPC message, the protocol version's
surface, the result type). For the hub's busiest request that is most of what the
upstream hop costs in Python. :func:`send_call` does the same exchange directly:

* the request id comes from the session's own dispatcher, so ids never collide with
  the SDK's requests, and the waiter is entered in the dispatcher's table of pending
  requests: the SDK session keeps owning the receive loop, routes this call's answer
  (and its progress notifications, the ``progressToken`` being the request id as
  the SDK makes it) to it, and wakes it with "connection closed" when the
  connection ends — so an upstream that crashes mid-call never leaves it waiting.
  Server-to-client requests and every other notification are the SDK's, as before;
* toward a stdio child the request is encoded once, with ``pydantic_core.to_json``,
  and goes into its stdin in the caller's task; toward Streamable HTTP the message
  goes into the transport's write stream with the headers the SDK would stamp;
* the answer is validated once, as a ``CallToolResult`` (after dropping a later
  protocol revision's fields, as the SDK does); a result of the wrong shape raises
  the ``ValidationError`` the caller turns into an error result;
* toward Streamable HTTP the request carries the call's resumption cursor callback
  (:mod:`mcp_hub.upstream.polling`): an upstream that closes the call's stream
  mid-call (SSE polling) is told to the call, which closes its client's in turn;
* cancelling the awaiting task (a timeout, a downstream cancel) sends
  ``notifications/cancelled`` upstream, shielded and bounded, as the SDK does;
* the hub's own client span (``mcp_hub.telemetry``) has already written the
  ``traceparent`` into the request's ``_meta``; the SDK's OpenTelemetry span,
  which records nothing unless an application installs a global tracer
  provider, is not opened.

Anything else takes the SDK's path: a 2026-07-28 session (its input rounds), a
request with params the lean path does not write itself, a dispatcher that is
not the one this module knows (its internals are checked once per session).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from pydantic_core import to_json

from mcp_hub.compat import sdk_client
from mcp_hub.compat.sdk_modules import later_revision_fields
from mcp_hub.upstream.polling import CallCursor, call_cursor, polls_of
from mcp_hub.upstream.sessions.modern import is_modern, send_resolving_rounds
from mcp_hub.upstream.stdio.writer import StdinWriteStream

__all__ = ["RawRequest", "lean_dispatcher", "send_call"]

logger = logging.getLogger("mcp_hub.upstream")

#: How long the courtesy ``notifications/cancelled`` may take to write (the SDK's bound).
CANCEL_WRITE_SECONDS = 5.0
#: Params of a ``tools/call`` the lean path writes itself; any other set field → SDK path.
_PLAIN_FIELDS = frozenset(("name", "arguments", "meta"))
_CLOSED = "Connection closed"


@dataclass
class RawRequest:
    """A request whose answer is passed on as the upstream sent it (a plain dict).

    A task-augmented ``tools/call`` (answered with a ``CreateTaskResult``) and the
    ``tasks/*`` requests: the hub routes them and rewrites task ids, nothing more.
    """

    method: str
    body: dict[str, Any]
    #: No typed params: the telemetry span and the lean path leave the request alone.
    params: None = None


class _Waiter:
    """Stands in for the dispatcher's pending entry of one request.

    The dispatcher hands an outcome to ``send.send_nowait`` (the answer's result
    dict or an ``ErrorData``, "connection closed" included) and calls
    ``on_progress`` for the request's progress notifications.
    """

    __slots__ = ("future", "on_progress", "send")

    def __init__(self, future: asyncio.Future[Any], on_progress: ProgressFnT | None) -> None:
        self.future = future
        self.on_progress = on_progress
        self.send = self

    def send_nowait(self, outcome: Any) -> None:
        if not self.future.done():
            self.future.set_result(outcome)


def lean_dispatcher(session: ClientSession) -> JSONRPCDispatcher[Any] | None:
    """The session's dispatcher when the lean path can use it (a known dispatcher, a
    handshake-era session); None for the SDK's path."""
    if is_modern(session):
        return None
    return sdk_client.lean_dispatcher(session)


async def send_call(
    session: ClientSession, request: Any, result_type: type[Any], call: Any,
    paused: Callable[[], contextlib.AbstractContextManager[Any]], *,
    progress_callback: ProgressFnT | None = None,
) -> Any:
    """``tools/call`` on the lean path when it applies, else the SDK's (rounds and all)."""
    if isinstance(request, RawRequest):
        return await sdk_client.send_raw(session, request.method, request.body, progress_callback)
    # Only the plain request: a tools/call that may become a task takes the SDK's path.
    dispatcher = lean_dispatcher(session) if type(request) is types.CallToolRequest else None
    params = request.params if dispatcher is not None else None
    if dispatcher is None or params is None or not _PLAIN_FIELDS.issuperset(
            params.model_fields_set):
        return await send_resolving_rounds(session, request, result_type, call, paused,
                                           progress_callback=progress_callback)
    wire: dict[str, Any] = {"name": params.name}
    if params.arguments is not None:
        wire["arguments"] = params.arguments
    cursor = call_cursor(call)
    try:
        raw = await _exchange(session, dispatcher, wire, dict(params.meta or {}),
                              progress_callback, cursor)
    finally:
        if cursor is not None:
            cursor.done()
    return _result(session, raw)


async def _exchange(session: ClientSession, dispatcher: JSONRPCDispatcher[Any],
                    params: dict[str, Any], meta: dict[str, Any],
                    on_progress: ProgressFnT | None,
                    cursor: CallCursor | None = None) -> dict[str, Any]:
    """Write the request, await its outcome; errors as ``send_raw_request`` raises them."""
    if not sdk_client.dispatcher_open(dispatcher):
        raise MCPError(code=types.CONNECTION_CLOSED, message=_CLOSED)
    pending = sdk_client.pending_table(dispatcher)
    request_id = sdk_client.allocate_id(dispatcher)
    while request_id in pending:
        request_id = sdk_client.allocate_id(dispatcher)
    if on_progress is not None:
        meta["progressToken"] = request_id
    if meta:
        params["_meta"] = meta
    waiter = _Waiter(asyncio.get_running_loop().create_future(), on_progress)
    pending[request_id] = waiter
    try:
        try:
            await _write(session, dispatcher, request_id, params, cursor)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise MCPError(code=types.CONNECTION_CLOSED, message=_CLOSED) from None
        outcome = await waiter.future
    except anyio.get_cancelled_exc_class():
        # A write interrupted by cancellation may still have landed: cancel it upstream
        # (an upstream ignores a cancel for an id it never saw).
        with anyio.move_on_after(CANCEL_WRITE_SECONDS, shield=True) as scope:
            await dispatcher.notify("notifications/cancelled",
                                    {"requestId": request_id, "reason": "caller cancelled"})
        if scope.cancelled_caught:
            logger.warning("courtesy cancel for request %r gave up: write blocked", request_id)
        raise
    finally:
        if pending.get(request_id) is waiter:
            del pending[request_id]
    if isinstance(outcome, types.ErrorData):
        raise MCPError(code=outcome.code, message=outcome.message, data=outcome.data)
    if not isinstance(outcome, dict):  # pragma: no cover - the dispatcher sends dicts
        raise MCPError(code=types.INTERNAL_ERROR, message="invalid response from upstream")
    return outcome


async def _write(session: ClientSession, dispatcher: JSONRPCDispatcher[Any],
                 request_id: int, params: dict[str, Any], cursor: CallCursor | None = None) -> None:
    """The request onto the wire: bytes into a stdio child's stdin, or the transport's
    write stream with the per-message headers (Streamable HTTP, SSE)."""
    stream = sdk_client.write_stream(dispatcher)
    if isinstance(stream, StdinWriteStream):
        await stream.send_bytes(to_json({"jsonrpc": "2.0", "id": request_id,
                                         "method": "tools/call", "params": params}) + b"\n")
        return
    if cursor is not None:
        cursor.polls = polls_of(stream)  # None: a connection that is not watched
    data: dict[str, Any] = {"method": "tools/call", "params": params}
    opts: Any = {}
    sdk_client.stamp(session, data, opts)
    headers: dict[str, str] = opts.setdefault("headers", {})
    if MCP_NAME_HEADER not in headers:
        headers[MCP_NAME_HEADER] = encode_header_value(params["name"])
    message = types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call",
                                   params=data["params"])
    await stream.send(SessionMessage(message=message,
                                     metadata=ClientMessageMetadata(
                                         headers=headers, on_resumption_token_update=cursor)))


def _result(session: ClientSession, raw: dict[str, Any]) -> types.CallToolResult:
    """The answer as a ``CallToolResult``, validated once (``ValidationError`` if not one)."""
    ttl = raw.get("ttlMs")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl < 0:
        raw["ttlMs"] = 0
    version = session.protocol_version or "2025-11-25"
    foreign = later_revision_fields("tools/call", version)
    if not foreign.isdisjoint(raw):
        raw = {key: value for key, value in raw.items() if key not in foreign}
    return types.CallToolResult.model_validate(raw, by_name=False)
