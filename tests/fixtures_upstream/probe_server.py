"""A stdio upstream that makes the hub's relaying observable.

- ``wait``: reports progress 0 (when asked) then blocks until cancelled; on cancellation it appends "cancelled" to the
  file named by ``PROBE_MARKER`` (so a test can see the upstream got
  ``notifications/cancelled``).
- ``roots``: asks the client for ``roots/list`` and returns the root URIs, or the
  error message it got.
- ``ask_both``: sends a sampling request and then an elicitation request; returns
  what came back (or the errors).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
MARKER = Path(os.environ.get("PROBE_MARKER", os.devnull))
_OBJ = {"type": "object", "properties": {}}


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[
        types.Tool(name=n, input_schema=_OBJ) for n in ("wait", "roots", "ask_both")
    ])


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    if params.name == "wait":
        await ctx.session.report_progress(0, None, "waiting")  # tells a test the call arrived
        try:
            await anyio.sleep_forever()
        finally:
            with MARKER.open("a") as f:
                f.write("cancelled\n")
    if params.name == "roots":
        try:
            roots = await ctx.session.list_roots()
        except MCPError as exc:
            return _text(f"error: {exc.message}")
        return _text(json.dumps([str(r.uri) for r in roots.roots]))
    answers: list[str] = []
    try:
        sampled = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(text="ping"))],
            max_tokens=5, related_request_id=ctx.request_id)
        content = sampled.content
        answers.append(content.text if isinstance(content, types.TextContent) else "?")
    except MCPError as exc:
        answers.append(f"error: {exc.message}")
    try:
        elicited = await ctx.session.elicit_form(
            "name?", {"type": "object", "properties": {"n": {"type": "string"}}},
            related_request_id=ctx.request_id)
        answers.append(f"{elicited.action}:{json.dumps(elicited.content)}")
    except MCPError as exc:
        answers.append(f"error: {exc.message}")
    return _text(" | ".join(answers))


async def main() -> None:
    server = Server("probe", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
