"""The one :class:`~mcp_hub.pipeline.context.CallContext` of the serving side, for every transport.

Everything an upstream asks for while a call runs — progress, log messages,
sampling, elicitation, roots — goes back on the request that caused the call.
:class:`RelayCallContext` holds the rules (a progress token is needed, the
client's logging level filters, a client that never declared a capability gets
no request and the upstream a clear error); a :class:`Downstream` carries the
messages on one transport:

* the SDK server (stdio, Streamable HTTP, SSE): :class:`SessionCallContext`,
  sent with ``related_request_id`` so on Streamable HTTP it rides that POST's
  response stream;
* the stdio fast path (:mod:`mcp_hub.downstream.stdio.fastpath`) and the HTTP fast
  path's channel (:mod:`mcp_hub.downstream.http.fast_channel`): both speak raw
  JSON-RPC, so both derive from :class:`JsonRpcDownstream`, which turns the
  relay's messages into plain dicts and needs only ``notify`` and ``request``.

Requests are sent with the upstream's params unchanged, which keeps the hub
transparent. A new concern of every call (identity, tracing) goes here, once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal, Protocol, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    INVALID_REQUEST,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ListRootsRequest,
    ListRootsResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ProgressNotificationParams,
)
from pydantic import BaseModel

from mcp_hub.compat.libs import request_connection
from mcp_hub.hub.interface import ServingHub
from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.log_levels import LOG_LEVELS, below_level, client_log_level

__all__ = ["LOG_LEVELS", "Downstream", "JsonRpcDownstream", "RelayCallContext",
           "SessionCallContext", "below_level", "connection_of"]

ClientMethod = Literal["sampling/createMessage", "elicitation/create", "roots/list"]
ResultT = TypeVar("ResultT", bound=BaseModel)


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The SDK connection behind a request (stable across one client's requests)."""
    return request_connection(ctx.session)


class Downstream(Protocol):
    """How a call's side traffic reaches the client of one request, on one transport."""

    def log_threshold(self) -> str | None:
        """The logging level the client set (None: it set none, every level goes)."""
        ...

    async def send_progress(self, params: ProgressNotificationParams,
                            request_id: str | int | None) -> None: ...

    async def send_log(self, params: LoggingMessageNotificationParams,
                       request_id: str | int | None) -> None: ...

    async def send_request(self, method: ClientMethod, params: BaseModel | None,
                           result_type: type[ResultT], request_id: str | int | None) -> ResultT: ...


def _dump(params: BaseModel) -> dict[str, Any]:
    dumped: dict[str, Any] = params.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


class JsonRpcDownstream(ABC):
    """A :class:`Downstream` that writes raw JSON-RPC: subclasses give ``notify`` (a
    notification to the client) and ``request`` (a request, waiting for its answer);
    progress, log messages and the client requests of a call are built on those."""

    @abstractmethod
    def log_threshold(self) -> str | None:
        """The logging level the client set (None: it set none, every level goes)."""

    @abstractmethod
    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send the notification ``method`` to the client."""

    @abstractmethod
    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        """Send a request to the client; its result (raises MCPError for an error answer)."""

    async def send_progress(self, params: ProgressNotificationParams,
                            request_id: str | int | None) -> None:
        await self.notify("notifications/progress", _dump(params))

    async def send_log(self, params: LoggingMessageNotificationParams,
                       request_id: str | int | None) -> None:
        await self.notify("notifications/message", _dump(params))

    async def send_request(self, method: ClientMethod, params: BaseModel | None,
                           result_type: type[ResultT], request_id: str | int | None) -> ResultT:
        raw = await self.request(method, None if params is None else _dump(params))
        return result_type.model_validate(raw)


class RelayCallContext(CallContext):
    """Relays a call's side traffic to the downstream request that started it."""

    def __init__(self, downstream: Downstream, *, tool_name: str, request_id: str | int | None,
                 progress_token: str | int | None, client_capabilities: ClientCapabilities | None,
                 client_name: str | None, session: Any, hub: ServingHub,
                 meta: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None,
                 transport: str = "pipe", protocol_version: str | None = None,
                 session_id: str | None = None) -> None:
        super().__init__(tool_name=tool_name, request_id=request_id, progress_token=progress_token,
                         client_capabilities=client_capabilities, client_name=client_name,
                         session=session, hub=hub, meta=meta, headers=headers,
                         transport=transport, protocol_version=protocol_version,
                         session_id=session_id)
        self._downstream = downstream

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        await self._downstream.send_progress(
            ProgressNotificationParams(progress_token=self.progress_token, progress=progress,
                                       total=total, message=message),
            self.request_id)

    async def log(self, level: LoggingLevel, data: Any, logger: str | None = None) -> None:
        # Handshake era: every level is sent until the client sets one (as the SDK does).
        if below_level(level, self._downstream.log_threshold()):
            return
        await self._downstream.send_log(
            LoggingMessageNotificationParams(level=level, data=data, logger=logger),
            self.request_id)

    async def elicitation_complete(self, elicitation_id: str) -> None:
        # The HTTP fast path's channel writes raw notifications; the SDK session has a method.
        params = {"elicitationId": elicitation_id}
        notify = getattr(self._downstream, "notify", None)
        if notify is not None:
            await notify("notifications/elicitation/complete", params)
            return
        send = getattr(self.session, "send_elicit_complete", None)
        if send is not None:
            await send(elicitation_id, related_request_id=self.request_id)

    async def upstream_closed_stream(self) -> None:
        """The upstream closed its stream of this call mid-call, for its client to poll
        (SSE polling, :mod:`mcp_hub.upstream.polling`): close the client's stream of the
        call in turn, where its transport can (the answer then waits in the event store
        for the client's ``GET`` with ``Last-Event-ID``)."""
        close = getattr(self._downstream, "close_stream", None)
        if close is not None:
            await close()

    async def create_message(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        if not self.can_sample:
            raise _unsupported("sampling")
        return await self._downstream.send_request(
            "sampling/createMessage", params, CreateMessageResult, self.request_id)

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        if not self.can_elicit:
            raise _unsupported("elicitation")
        return await self._downstream.send_request(
            "elicitation/create", params, ElicitResult, self.request_id)

    async def list_roots(self) -> ListRootsResult:
        if not self.can_list_roots:
            raise _unsupported("roots")
        return await self._downstream.send_request("roots/list", None, ListRootsResult,
                                                   self.request_id)


def _unsupported(what: str) -> MCPError:
    verb = "are" if what == "roots" else "is"
    return MCPError(INVALID_REQUEST, f"{what} {verb} not supported by the client connected to the hub")


class _SdkDownstream:
    """The SDK server's session of one request (stdio, Streamable HTTP, SSE)."""

    __slots__ = ("_ctx",)

    def __init__(self, ctx: ServerRequestContext[Any, Any]) -> None:
        self._ctx = ctx

    def log_threshold(self) -> str | None:
        return client_log_level(getattr(connection_of(self._ctx), "state", None))

    async def send_progress(self, params: ProgressNotificationParams,
                            request_id: str | int | None) -> None:
        await self._ctx.session.send_notification(ProgressNotification(params=params),
                                                  related_request_id=request_id)

    async def send_log(self, params: LoggingMessageNotificationParams,
                       request_id: str | int | None) -> None:
        await self._ctx.session.send_notification(LoggingMessageNotification(params=params),
                                                  related_request_id=request_id)

    async def close_stream(self) -> None:
        """Close the call's SSE stream for the client to resume it (Streamable HTTP with an
        event store and a 2025-11-25 or later client; elsewhere the SDK gives no callback)."""
        close = self._ctx.close_sse_stream
        if close is not None:
            await close()

    async def send_request(self, method: ClientMethod, params: BaseModel | None,
                           result_type: type[ResultT], request_id: str | int | None) -> ResultT:
        request: Any
        if method == "sampling/createMessage":
            request = CreateMessageRequest(params=params)  # type: ignore[arg-type]
        elif method == "elicitation/create":
            request = ElicitRequest(params=params)  # type: ignore[arg-type]
        else:
            request = ListRootsRequest()
        result: ResultT = await self._ctx.session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=request_id))
        return result


def _session_id(request: Any) -> str | None:
    """The MCP session id of an HTTP request (Streamable HTTP header, or SSE query)."""
    if request is None:
        return None
    value = request.headers.get("mcp-session-id") or request.query_params.get("session_id")
    return value if isinstance(value, str) else None


class SessionCallContext(RelayCallContext):
    """The call context of a request the SDK server dispatched."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], tool_name: str, hub: ServingHub) -> None:
        meta = ctx.meta
        session = ctx.session
        params = session.client_params
        super().__init__(
            _SdkDownstream(ctx),
            tool_name=tool_name,
            request_id=ctx.request_id,
            progress_token=meta.get("progress_token") if meta else None,
            client_capabilities=session.client_capabilities,
            client_name=params.client_info.name if params and params.client_info else None,
            session=session,
            hub=hub,
            meta=meta,
            headers=getattr(ctx.request, "headers", None),
            transport="pipe" if ctx.request is None else "tcp",
            protocol_version=ctx.protocol_version,
            session_id=_session_id(ctx.request),
        )
