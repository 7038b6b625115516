"""A :class:`~mcp_hub.context.CallContext` bound to a real downstream request.

Everything an upstream asks for while a call runs — progress, log messages,
sampling, elicitation, roots — goes back on the request that caused the call
(``related_request_id``), so on Streamable HTTP it rides that POST's response
stream. Requests are sent with the upstream's params unchanged, which keeps the
hub transparent, and a client that never declared the capability gets no
request at all: the upstream receives a clear error instead.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    INVALID_REQUEST,
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

from mcp_hub.context import CallContext

__all__ = ["LOG_LEVELS", "SessionCallContext", "below_level", "connection_of"]

LOG_LEVELS: dict[str, int] = {
    "debug": 0, "info": 1, "notice": 2, "warning": 3,
    "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}


def below_level(level: str, threshold: str | None) -> bool:
    """True when a client set a logging level (``threshold``) and ``level`` is under it."""
    return threshold is not None and LOG_LEVELS.get(level, 0) < LOG_LEVELS.get(threshold, 0)


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The SDK connection behind a request (stable across one client's requests)."""
    return getattr(ctx.session, "_connection", ctx.session)


def _session_id(request: Any) -> str | None:
    """The MCP session id of an HTTP request (Streamable HTTP header, or SSE query)."""
    if request is None:
        return None
    value = request.headers.get("mcp-session-id") or request.query_params.get("session_id")
    return value if isinstance(value, str) else None


class SessionCallContext(CallContext):
    """Relays a call's side traffic to the downstream request that started it."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], tool_name: str, hub: Any) -> None:
        meta = ctx.meta
        token = meta.get("progress_token") if meta else None
        session = ctx.session
        params = session.client_params
        headers = getattr(ctx.request, "headers", None)
        super().__init__(
            tool_name=tool_name,
            request_id=ctx.request_id,
            progress_token=token,
            client_capabilities=session.client_capabilities,
            client_name=params.client_info.name if params and params.client_info else None,
            session=session,
            hub=hub,
            meta=meta,
            headers=headers,
            transport="pipe" if ctx.request is None else "tcp",
            protocol_version=ctx.protocol_version,
            session_id=_session_id(ctx.request),
        )
        self._ctx = ctx

    def _meta(self) -> ServerMessageMetadata:
        return ServerMessageMetadata(related_request_id=self.request_id)

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        if self.progress_token is None:
            return
        await self._ctx.session.send_notification(
            ProgressNotification(
                params=ProgressNotificationParams(
                    progress_token=self.progress_token, progress=progress, total=total,
                    message=message,
                )
            ),
            related_request_id=self.request_id,
        )

    async def log(self, level: LoggingLevel, data: Any, logger: str | None = None) -> None:
        conn = connection_of(self._ctx)
        state = getattr(conn, "state", None)
        threshold = state.get("mcp_hub.log_level") if isinstance(state, dict) else None
        if below_level(level, threshold):
            return
        await self._ctx.session.send_notification(
            LoggingMessageNotification(
                params=LoggingMessageNotificationParams(level=level, data=data, logger=logger)
            ),
            related_request_id=self.request_id,
        )

    async def create_message(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        if not self.can_sample:
            raise MCPError(
                INVALID_REQUEST, "sampling is not supported by the client connected to the hub"
            )
        return await self._ctx.session.send_request(
            CreateMessageRequest(params=params), CreateMessageResult, metadata=self._meta()
        )

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        if not self.can_elicit:
            raise MCPError(
                INVALID_REQUEST, "elicitation is not supported by the client connected to the hub"
            )
        return await self._ctx.session.send_request(
            ElicitRequest(params=params), ElicitResult, metadata=self._meta()
        )

    async def list_roots(self) -> ListRootsResult:
        if not self.can_list_roots:
            raise MCPError(
                INVALID_REQUEST, "roots are not supported by the client connected to the hub"
            )
        return await self._ctx.session.send_request(
            ListRootsRequest(), ListRootsResult, metadata=self._meta()
        )
