"""The 2026-07-28 tasks extension's rules at the hub's door (``io.modelcontextprotocol/tasks``).

The hub routes ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` to the task's
upstream (:mod:`mcp_hub.hub.tasks`); before that, for a 2026-07-28 request, it applies
what the extension asks of any server:

* ``tasks/result`` and ``tasks/list`` do not exist in the extension: ``-32601``;
* ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` from a request that does not
  declare the extension in its ``_meta`` client capabilities fail with ``-32021``
  (missing required client capability), naming the extension;
* over HTTP their ``Mcp-Name`` header, when sent, must be ``params.taskId``
  (``-32020``, header mismatch).

Handshake-era (2025-11-25) requests keep the 2025 methods; ``tasks/update`` is not
one of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict

from mcp_hub.hub.tasks import TASKS_EXTENSION, declares_tasks

__all__ = ["HEADER_MISMATCH", "TaskMethods", "TaskUpdateParams"]

#: SEP-2243: a routing header that disagrees with the body.
HEADER_MISMATCH = -32020
#: Methods of the extension that need it declared.
_GATED = frozenset(("tasks/get", "tasks/update", "tasks/cancel"))
#: 2025-11-25 methods the extension removed.
_REMOVED = frozenset(("tasks/result", "tasks/list"))

Ctx = ServerRequestContext[Any, Any]


class TaskUpdateParams(types.RequestParams):
    """``tasks/update``: the task and whatever the client sends (``inputResponses``)."""

    model_config = ConfigDict(extra="allow")
    taskId: str


def _named(ctx: Ctx) -> str | None:
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("mcp-name") if headers is not None else None
    return value if isinstance(value, str) else None


class TaskMethods:
    """Server middleware: the extension's method rules (see the module docstring)."""

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method not in _GATED and method not in _REMOVED:
            return await call_next(ctx)
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            if method == "tasks/update":
                raise MCPError(types.METHOD_NOT_FOUND, "Method not found")
            return await call_next(ctx)
        if method in _REMOVED:
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found")
        params: Mapping[str, Any] = ctx.params or {}
        named = _named(ctx)
        if named is not None and named != params.get("taskId"):
            raise MCPError(HEADER_MISMATCH, "Mcp-Name does not match params.taskId")
        if not declares_tasks(dict(params)):
            raise MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                           f"{method} needs the {TASKS_EXTENSION} extension",
                           data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})
        return await call_next(ctx)
