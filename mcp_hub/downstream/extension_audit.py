"""One audit line per extension request: tasks, MCP Apps and skill reads, skills.

Tool calls are audited by the Hub (:meth:`Hub.call_tool`, a task-augmented call
included). The requests the extensions add do not pass there, so this server
middleware writes their line (:meth:`mcp_hub.auth.audit.AuditLog.request`):

* ``tasks/get``, ``tasks/result``, ``tasks/cancel`` (target: the hub's task id,
  whose first segment names the server) and ``tasks/list``;
* ``skills/list``, ``skills/get`` and ``resources/directory/read`` (target: the URI);
* a ``resources/read`` of a ``ui://`` (an app) or ``skill://`` address.

The server is the one the hub's namespace names (``ui://SERVER/…``,
``skill://SERVER/…``, ``SERVER/<id>``); refused requests (an unknown task, a
resource the caller's rules hide) are written with outcome ``error``, the same
line as any other failure, since the hub answers them alike. With ``[audit]``
off it costs one attribute read per request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_hub.downstream.call_context import connection_of
from mcp_hub.downstream.identity import caller_for
from mcp_hub.hub.access import Caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.protocol.apps import UI_SCHEME
from mcp_hub.protocol.skills import SKILL_SCHEME, split_namespaced

__all__ = ["ExtensionAudit", "audited_target"]

#: Methods always audited, and the param that names their target.
_AUDITED = {"tasks/get": "taskId", "tasks/result": "taskId", "tasks/cancel": "taskId",
            "tasks/list": None, "skills/list": None, "skills/get": "uri",
            "resources/directory/read": "uri"}


def audited_target(method: str, params: Any) -> tuple[bool, str | None, str | None]:
    """Whether a request is audited here, and its target and server (when named)."""
    params = params if isinstance(params, Mapping) else {}
    if method == "resources/read":
        uri = params.get("uri")
        if not (isinstance(uri, str) and uri.startswith((UI_SCHEME, SKILL_SCHEME))):
            return False, None, None
        found = split_namespaced(uri)
        return True, uri, found[0] if found is not None else None
    if method not in _AUDITED:
        return False, None, None
    key = _AUDITED[method]
    target = params.get(key) if key is not None else None
    if not isinstance(target, str):
        return True, None, None
    if key == "taskId":
        server, slash, _ = target.partition("/")
        return True, target, server if slash else None
    found = split_namespaced(target)
    return True, target, found[0] if found is not None else None


class ExtensionAudit:
    """SDK server middleware: the audit line of each extension request."""

    def __init__(self, hub: ServingHub, endpoint: Caller) -> None:
        self.hub = hub
        self.endpoint = endpoint

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        audit = self.hub.audit
        if not audit.enabled or ctx.request_id is None:
            return await call_next(ctx)
        audited, target, server = audited_target(ctx.method, ctx.params)
        if not audited:
            return await call_next(ctx)
        start = time.monotonic()
        outcome = "error"
        try:
            result = await call_next(ctx)
            outcome = "ok"
            return result
        finally:
            caller = caller_for(ctx, self.endpoint)
            session = getattr(connection_of(ctx), "session_id", None)
            audit.request(identity=caller.identity, client_id=caller.client_id,
                          session=session if isinstance(session, str) else None,
                          method=ctx.method, target=target, server=server, outcome=outcome,
                          seconds=time.monotonic() - start)
