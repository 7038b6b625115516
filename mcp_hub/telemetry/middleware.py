"""A SERVER span for every request the SDK server dispatches, except ``tools/call``.

``tools/call`` is traced by :meth:`Hub.call_tool` itself (all transports, the
bridge's ``tool_call``), so this middleware leaves it alone; every other request
that reaches the SDK server — over stdio, Streamable HTTP or SSE — gets its span
here: ``initialize``, ``tools/list``, ``prompts/get {name}``,
``resources/read {uri}`` (an app's ``ui://`` HTML included), ``tasks/get`` (and
``tasks/result``, ``tasks/cancel``, ``tasks/list``; a task id is one of a kind, so
it names no span), ``skills/list``, ``skills/get {uri}``,
``resources/directory/read {uri}``, ``completion/complete``, ``ping`` … (the fast paths
trace the lists they answer themselves). Notifications get none.

It reads ``owner.telemetry`` per request, so a reload that turns telemetry on or
off applies at once; with telemetry off it costs one attribute read and a call.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

__all__ = ["RequestSpans"]

_TARGET_PARAM = {"prompts/get": "name", "resources/read": "uri", "resources/subscribe": "uri",
                 "resources/unsubscribe": "uri", "skills/get": "uri",
                 "resources/directory/read": "uri"}


def _session_id(request: Any) -> str | None:
    if request is None:
        return None
    value = request.headers.get("mcp-session-id") or request.query_params.get("session_id")
    return value if isinstance(value, str) else None


class RequestSpans:
    """SDK server middleware (``server.middleware``); ``owner`` has a ``telemetry``."""

    def __init__(self, owner: Any) -> None:
        self.owner = owner

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        telemetry = self.owner.telemetry
        if not telemetry.enabled or ctx.request_id is None or ctx.method == "tools/call":
            return await call_next(ctx)
        params = ctx.params
        key = _TARGET_PARAM.get(ctx.method)
        target = params.get(key) if key is not None and isinstance(params, dict) else None
        request = ctx.request
        with telemetry.request(
                ctx.method, target if isinstance(target, str) else None,
                request_id=ctx.request_id, meta=ctx.meta,
                headers=getattr(request, "headers", None),
                transport="pipe" if request is None else "tcp",
                protocol_version=ctx.protocol_version, session_id=_session_id(request)):
            return await call_next(ctx)
