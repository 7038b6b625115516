"""Calls on one upstream session: send, deadlines, retry after a lost connection.

Timeout ``timeout`` (per server), reset by every upstream progress notification
for that call, never beyond ``max_call_seconds`` from the start; paused while a
sampling or elicitation request of that call is answered downstream. A call in
flight when the connection dies fails at once; it is retried once, after the
reconnect, only when the tool is ``readOnlyHint: true`` (or provably never
reached the server).
"""

from __future__ import annotations

from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_hub.pipeline.context import CallContext
from mcp_hub.redact import redact
from mcp_hub.telemetry import client_span, progress_event
from mcp_hub.upstream.conn_state import BACKOFF_INITIAL, BACKOFF_JITTER, ConnectionState
from mcp_hub.upstream.failures import CallLost, validation_summary
from mcp_hub.upstream.in_flight import InFlightCall, current_call
from mcp_hub.upstream.lean_call import RawRequest, send_call
from mcp_hub.upstream.relay_order import RelayBarrier
from mcp_hub.upstream.sessions.companion import wants_companion
from mcp_hub.upstream.sessions.lenient import declaring
from mcp_hub.upstream.sessions.modern import TaskAnswer, TaskCallToolRequest
from mcp_hub.upstream.status import ServerState
from mcp_hub.upstream.transports import INVALID_RESPONSE

__all__ = ["Calls"]

ResultT = TypeVar("ResultT", bound=BaseModel)

#: Upstream errors of a ``tools/call`` passed to the client as JSON-RPC errors.
_PASSED_ON = frozenset((types.URL_ELICITATION_REQUIRED, types.MISSING_REQUIRED_CLIENT_CAPABILITY))


def _call_request(raw: str, args: dict[str, Any] | None, call: CallContext | None) -> Any:
    """The upstream ``tools/call``: typed, or plain JSON when the client asked for a task."""
    if call is None or call.task is None:
        params = types.CallToolRequestParams(name=raw, arguments=args)
        if call is not None and call.task_extension:
            return TaskCallToolRequest(params=params)
        return types.CallToolRequest(params=params)
    body: dict[str, Any] = {"name": raw, "task": call.task}
    if args is not None:
        body["arguments"] = args
    return RawRequest("tools/call", body)


def _call_result(answer: Any, call: CallContext | None, server: str) -> types.CallToolResult:
    """A task-augmented call's ``CreateTaskResult`` (2025-11-25: a ``task`` object;
    2026-07-28 extension: flat, ``resultType: "task"``) goes to ``call.created_task``; the
    pipeline goes on with an empty result in its place (the downstream answers the task)."""
    if isinstance(answer, TaskAnswer) and call is not None:
        call.created_task = (server, answer.model_dump(by_alias=True, exclude_none=True))
        return types.CallToolResult(content=[])
    if not isinstance(answer, dict):
        return answer  # type: ignore[no-any-return]
    if isinstance(answer.get("task"), dict) and call is not None:
        call.created_task = (server, answer)
        return types.CallToolResult(content=[])
    return types.CallToolResult.model_validate(answer)


class Calls:
    """Forwarding requests on the live session (see the module docstring).

    One per connection, over its :class:`ConnectionState`; the registry's handlers
    of the connection's tools call :meth:`call_tool` directly (the tool call path).
    """

    __slots__ = ("shared",)

    def __init__(self, shared: ConnectionState) -> None:
        self.shared = shared

    async def wait_session(self, budget: float, old: ClientSession | None = None
                           ) -> ClientSession | None:
        """A live session other than ``old``, waiting up to ``budget`` s while (re)connecting."""
        shared = self.shared
        session = shared.live()
        if session is not None and session is not old:
            return session
        if shared.state in (ServerState.PARKED, ServerState.DISABLED) or budget <= 0:
            return None
        with anyio.move_on_after(budget):
            while True:
                await shared.session_changed.wait()
                session = shared.live()
                if session is not None and session is not old:
                    return session
                if shared.state in (ServerState.PARKED, ServerState.DISABLED):
                    return None
        return None

    async def call_tool(
        self, raw: str, args: dict[str, Any] | None, call: CallContext | None,
        *, pass_errors: bool = False,
    ) -> types.CallToolResult:
        """Forward ``tools/call`` to the upstream; a ``CallToolResult``, except that the
        upstream's JSON-RPC errors are raised as they are with ``pass_errors`` (a call of a
        tool nobody lists: the server's own answer, docs/upstreams.md) or when meant for
        the client (``_PASSED_ON``)."""
        shared = self.shared
        config = shared.config
        start = anyio.current_time()
        hard_deadline = start + config.max_call_seconds
        session = shared.live()
        if session is None:
            session = await self.wait_session(min(config.timeout, config.connect_timeout))
            if session is None:
                return shared.error_result(
                    f"{shared.unavailable()}; tool '{raw}' was not called.")
        if shared.companion is not None and wants_companion(call):
            # A 2025 client on a 2026-07-28 upstream: the handshake session, where the
            # server can ask it (mcp_hub.upstream.sessions.companion).
            session = await shared.companion.get(config.connect_timeout) or session
        request = _call_request(raw, args, call)
        for attempt in (1, 2):
            try:
                result = _call_result(await self._send(session, request, types.CallToolResult,
                                                       call, config.timeout, hard_deadline), call, shared.name)
            except TimeoutError:
                return shared.error_result(
                    f"Server '{shared.name}' did not answer tool '{raw}' within "
                    f"{config.timeout:g} s (timeout); the call was cancelled upstream.")
            except CallLost as exc:
                record = shared.tools.get(raw)
                safe = not exc.reached or (record is not None and record.read_only)
                if attempt == 1 and safe:
                    budget = min(hard_deadline - anyio.current_time(), config.connect_timeout
                                 + BACKOFF_INITIAL * (1 + BACKOFF_JITTER))
                    retry_session = await self.wait_session(budget, old=session)
                    if retry_session is not None:
                        session = retry_session
                        shared.log.info("upstream %s: retrying tool %s after reconnect (%s)",
                                    shared.name, raw,
                                    "read-only" if exc.reached else "never reached the server")
                        continue
                return shared.error_result(
                    f"Server '{shared.name}' connection was lost during the call to tool "
                    f"'{raw}': {exc}. The call may or may not have completed.")
            except MCPError as exc:
                if exc.code in _PASSED_ON or (pass_errors and not exc.message.startswith(
                        INVALID_RESPONSE)):
                    # A request to the client (open this URL) or a capability it must
                    # declare, not a tool failure: it travels on as the JSON-RPC error
                    # it is, data included (-32021 becomes HTTP 400 for a 2026-07-28
                    # client).
                    raise
                if exc.message.startswith(INVALID_RESPONSE):
                    return shared.error_result(
                        f"Server '{shared.name}' did not answer tool '{raw}' with a valid "
                        f"response: {redact(exc.message)}")
                return shared.error_result(redact(exc.message))
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def raw_request(self, method: str, body: dict[str, Any],
                          call: CallContext | None = None) -> dict[str, Any]:
        """Send ``method`` with ``body`` and return the answer as sent (``tasks/*``)."""
        shared = self.shared
        config = shared.config
        session = shared.live() or await self.wait_session(
            min(config.timeout, config.connect_timeout))
        if session is None:
            raise MCPError(types.INTERNAL_ERROR, f"{shared.unavailable()}; {method} failed.")
        start = anyio.current_time()
        try:
            answer: Any = await self._send(
                session, RawRequest(method, body), types.Result, call, config.timeout,
                start + config.max_call_seconds)
        except TimeoutError:
            raise MCPError(types.REQUEST_TIMEOUT, f"Server '{shared.name}' did not answer "
                           f"{method} within {config.timeout:g} s") from None
        except CallLost as exc:
            raise MCPError(types.INTERNAL_ERROR, f"Server '{shared.name}' connection was lost "
                           f"during {method}: {exc}") from None
        return dict(answer)

    async def request(
        self,
        request: Any,
        result_type: type[ResultT],
        call: CallContext | None = None,
        *,
        what: str,
    ) -> ResultT:
        """Send a non-tool request (prompts/get, resources/read, …); errors are ``MCPError``."""
        shared = self.shared
        config = shared.config
        session = shared.live() or await self.wait_session(
            min(config.timeout, config.connect_timeout))
        if session is None:
            raise MCPError(types.INTERNAL_ERROR, f"{shared.unavailable()}; {what} failed.")
        start = anyio.current_time()
        try:
            return await self._send(session, request, result_type, call, config.timeout,
                                    start + config.max_call_seconds)
        except TimeoutError:
            raise MCPError(types.REQUEST_TIMEOUT,
                           f"Server '{shared.name}' did not answer {what} within "
                           f"{config.timeout:g} s") from None
        except CallLost as exc:
            raise MCPError(types.INTERNAL_ERROR,
                           f"Server '{shared.name}' connection was lost during {what}: {exc}"
                           ) from None

    async def _send(
        self,
        session: ClientSession,
        request: Any,
        result_type: type[ResultT],
        call: CallContext | None,
        call_timeout: float,
        hard_deadline: float,
    ) -> ResultT:
        """One request on the live session with the call's routing and deadline rules."""
        shared = self.shared
        record = InFlightCall(shared, call, call_timeout, hard_deadline)
        key = next(shared.ids)
        shared.inflight[key] = record
        token = current_call.set(record)

        relays = RelayBarrier()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            with relays.relaying():
                record.extend()
                progress_event(call, progress, total)
                if call is not None and call.progress_token is not None:
                    await call.report_progress(progress, total, message)

        try:
            with anyio.CancelScope(
                deadline=min(anyio.current_time() + call_timeout, hard_deadline)
            ) as scope, client_span(call, shared.name, request, shared.config.transport) as traced, \
                    declaring(call.client_capabilities if call is not None else None):
                record.scope = scope
                # A plain tools/call takes the lean path (upstream/lean_call.py); a
                # 2026-07-28 upstream's input rounds are resolved through ``call``.
                result: ResultT = await send_call(
                    session, request, result_type, call, record.paused,
                    progress_callback=on_progress)
                traced.done(result)
                await relays.drain()  # progress the upstream sent first goes first
            if scope.cancelled_caught:
                raise TimeoutError
            return result
        except ValidationError as exc:
            # A response to this request, but not of the shape the method returns.
            message = f"{INVALID_RESPONSE}: {validation_summary(exc, result_type)}"
            shared.log.warning("upstream %s: %s", shared.name, message)
            raise MCPError(types.INTERNAL_ERROR, message) from None
        except MCPError as exc:
            if shared.is_fatal(exc) and exc.code != types.REQUEST_TIMEOUT:
                session_gone = shared.session_gone(exc)
                reason = shared.lost_reason or (
                    "the server no longer knows this HTTP session" if session_gone
                    else exc.message)
                shared.mark_lost(reason)
                raise CallLost(reason, reached=not session_gone) from None
            raise
        finally:
            current_call.reset(token)
            del shared.inflight[key]
