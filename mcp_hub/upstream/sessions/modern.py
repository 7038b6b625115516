"""2026-07-28 upstreams: discovery instead of the handshake, and input-required rounds.

``[servers.NAME] protocol`` picks the era the hub speaks to an upstream:

- ``"2025"`` (default): the ``initialize`` handshake, as always.
- ``"2026"``: ``server/discover`` and no handshake; the connection fails if the
  upstream does not speak 2026-07-28.
- ``"auto"``: ``server/discover`` first, ``initialize`` when the upstream does
  not answer it (the SDK's ``mode="auto"`` policy).

On a 2026-07-28 session a ``tools/call``, ``prompts/get`` or ``resources/read``
may come back as an ``InputRequiredResult``. The hub resolves every round
itself: each embedded request goes to the call's
:class:`~mcp_hub.pipeline.context.CallContext` — a real server-initiated request for a
2025 client, a hub-held input round for a 2026-07-28 client (under the hub's
own sealed state) — and the call is re-sent with the answers and the
upstream's state. The upstream's state never leaves the hub.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolRequest,
    CallToolResult,
    DiscoverRequest,
    DiscoverResult,
    EmptyResult,
    ErrorData,
    GetPromptRequest,
    GetPromptResult,
    Implementation,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    InputResponses,
    PingRequest,
    ReadResourceRequest,
    ReadResourceResult,
    ServerCapabilities,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, TypeAdapter

from mcp_hub.compat.sdk_modules import negotiate_auto, run_input_required_driver
from mcp_hub.pipeline.context import INPUT_KEY, CallContext

__all__ = [
    "Protocol", "TaskAnswer", "TaskCallToolRequest", "is_modern", "keepalive_request",
    "open_session", "send_resolving_rounds",
]

Protocol = Literal["auto", "2025", "2026"]
#: Rounds one upstream call may take before the hub gives up on it.
MAX_UPSTREAM_ROUNDS = 10
logger = logging.getLogger("mcp_hub.upstream")


def is_modern(session: ClientSession) -> bool:
    return session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def open_session(session: ClientSession, protocol: Protocol
                       ) -> tuple[Implementation | None, ServerCapabilities | None]:
    """Handshake or discovery per ``protocol``; the upstream's identity and capabilities."""
    if protocol == "2025":
        result = await session.initialize()
        return result.server_info, result.capabilities
    if protocol == "2026":
        await session.discover()
    else:
        await negotiate_auto(session)
    return session.server_info, session.server_capabilities


def keepalive_request(session: ClientSession) -> tuple[Any, type[Any]]:
    """``ping`` on a handshake session; ``server/discover`` where ping no longer exists."""
    if is_modern(session):
        return DiscoverRequest(), DiscoverResult
    return PingRequest(), EmptyResult


class TaskCallToolRequest(CallToolRequest):
    """A ``tools/call`` whose client declared the 2026-07-28 tasks extension: the server
    may answer it with a task (:class:`TaskAnswer`) instead of a result."""


class TaskAnswer(BaseModel):
    """A flat ``CreateTaskResult`` (``resultType: "task"``), kept as the server sent it."""

    model_config = ConfigDict(extra="allow")
    resultType: Literal["task"]
    taskId: str


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {
    CallToolRequest: TypeAdapter(CallToolResult | InputRequiredResult),
    TaskCallToolRequest: TypeAdapter(TaskAnswer | CallToolResult | InputRequiredResult),
    GetPromptRequest: TypeAdapter(GetPromptResult | InputRequiredResult),
    ReadResourceRequest: TypeAdapter(ReadResourceResult | InputRequiredResult),
}


def _with_answers(request: Any, responses: InputResponses | None, state: str | None) -> Any:
    params = request.params.model_copy(update={"input_responses": responses,
                                               "request_state": state})
    return request.model_copy(update={"params": params})


async def _dispatch(call: CallContext, req: InputRequest) -> InputResponse | ErrorData:
    """One embedded request, answered through the call's downstream client."""
    try:
        if req.method == "sampling/createMessage":
            return await call.create_message(req.params)
        if req.method == "elicitation/create":
            return await call.elicit(req.params)
        return await call.list_roots()
    except MCPError as exc:
        return exc.error


async def send_resolving_rounds(
    session: ClientSession, request: Any, result_type: type[Any],
    call: CallContext | None, paused: Callable[[], contextlib.AbstractContextManager[Any]],
    **options: Any,
) -> Any:
    """``session.send_request``, resolving a modern upstream's input rounds on the way."""
    if not is_modern(session) or not isinstance(
            request, CallToolRequest | GetPromptRequest | ReadResourceRequest):
        return await session.send_request(request, result_type, **options)
    answering = call if call is not None else CallContext()
    union = _ADAPTERS[type(request)]

    async def send(responses: InputResponses | None, state: str | None) -> Any:
        return await session.send_request(_with_answers(request, responses, state), union,
                                          **options)

    async def dispatch(key: str, req: InputRequest) -> InputResponse | ErrorData:
        token = INPUT_KEY.set(key)  # a hub round asking its own client keeps the key
        try:
            with paused():
                return await _dispatch(answering, req)
        finally:
            INPUT_KEY.reset(token)

    first: Awaitable[Any] = session.send_request(request, union, **options)
    return await run_input_required_driver(await first, dispatch=dispatch, retry=send,
                                           max_rounds=MAX_UPSTREAM_ROUNDS)
