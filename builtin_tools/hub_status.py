"""``hub_status``: what the hub is connected to and what it refused.

With a running Hub attached to the call (``call.hub``) the answer is
``hub.status(call.caller)``, what the caller reaches: every upstream with its state, transport, tool/prompt/resource
counts, last error (secrets redacted), reconnect count and since when; rejected
or shadowed tools with the reason; the tool_search state; version and uptime.
Without one (``mcp-hub call``, tests) it reports what the registry alone knows:
the version, tools by toolset and the rejected registrations.
"""

from __future__ import annotations

import inspect
import os
import time
from pathlib import Path
from typing import Any

from mcp_hub import __version__
from mcp_hub.hub.diagnosis import rejected_tools, summary
from mcp_hub.pipeline.context import CallContext
from mcp_hub.pipeline.runtime import get_config
from mcp_hub.registry.tool_registry import ToolRegistry, registry

__all__ = ["HUB_STATUS_SCHEMA", "hub_status_tool", "registry_status"]

_STARTED = time.time()


def registry_status(reg: ToolRegistry) -> dict[str, Any]:
    """A status built from the registry alone, shaped like ``Hub.status()``."""
    by_toolset = {name: len(tools) for name, tools in sorted(reg.toolsets().items())}
    return {
        "hub": {
            "name": get_config().hub.name,
            "version": __version__,
            "attached": False,
            "pid": os.getpid(),
            "uptime_seconds": round(time.time() - _STARTED, 1),
        },
        "upstreams": [],
        "tools": {"total": len(reg), "by_toolset": by_toolset},
        "rejected_tools": rejected_tools(reg.rejections),
        "tool_search": None,
    }


# ── 1. handler ──────────────────────────────────────────────────────────────────


async def hub_status_tool(args: dict[str, Any], *, call: CallContext | None = None,
                          **_context: Any) -> dict[str, Any]:
    """The running hub's status, or the registry's when no hub is attached."""
    hub = call.hub if call is not None else None
    status_fn = getattr(hub, "status", None)
    if status_fn is None:
        return registry_status(registry)
    # The caller's own view (mcp_hub.hub.access.OpsView): a narrow identity sees only its servers.
    caller = call.caller if call is not None else None
    status = status_fn(caller) if caller is not None else status_fn()
    if inspect.isawaitable(status):
        status = await status
    status = dict(status)
    # First, one line a model can relay: what keeps tools away, if anything.
    source = status.get("hub", {}).get("config")
    line = summary(status.get("upstreams", []), Path(source) if source else None)
    state = status.get("state") or {}
    if state.get("available") is False:
        line = (f"The shared state store ({state.get('backend')}) is unavailable: calls go on, "
                "but what replicas share (pins, rate limits, cross-replica messages) is "
                "degraded. " + line)
    return {"summary": line, **status}


# ── 2. check_fn ─────────────────────────────────────────────────────────────────


def check_hub_status_requirements() -> bool:
    """Always available."""
    return True


# ── 3. schema ───────────────────────────────────────────────────────────────────

HUB_STATUS_SCHEMA: dict[str, Any] = {
    "name": "hub_status",
    "description": (
        "Report the state of this MCP hub: first a one-line summary of what is wrong (or "
        "that all is well), then each upstream MCP server with its state "
        "(connecting, ready, reconnecting, parked, needs_login, disabled), transport, tool/prompt/resource "
        "counts, last error, reconnect count and since when; tools that were rejected or "
        "shadowed and why; whether tool search is active; the hub version and uptime. "
        "Read-only, takes no arguments. Use it when an expected tool is missing or failing."
    ),
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "annotations": {
        "title": "Hub status",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}

# ── 4. registration ─────────────────────────────────────────────────────────────

registry.register(
    name="hub_status",
    toolset="hub",
    schema=HUB_STATUS_SCHEMA,
    handler=hub_status_tool,
    check_fn=check_hub_status_requirements,
    is_async=True,
    emoji="🛰",
)
