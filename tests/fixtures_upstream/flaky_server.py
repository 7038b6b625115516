"""A stdio upstream whose read-only tool kills its process on the first call.

``lookup`` (``readOnlyHint: true``) and ``write`` (not read-only) both exit the
process mid-call while the marker file named by ``FLAKY_MARKER`` does not
exist (creating it first); once it exists they answer ``"ok <n>"``. So the first
call dies in flight, and a retry on the restarted process succeeds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

MARKER = Path(os.environ["FLAKY_MARKER"])


async def list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    return types.ListToolsResult(tools=[
        types.Tool(name="lookup", input_schema=schema,
                   annotations=types.ToolAnnotations(read_only_hint=True)),
        types.Tool(name="write", input_schema=schema),
    ])


async def call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    if not MARKER.exists():
        MARKER.write_text("died once")
        sys.stderr.flush()
        os._exit(3)
    n = (params.arguments or {}).get("n", 0)
    return types.CallToolResult(content=[types.TextContent(text=f"ok {n}")])


async def main() -> None:
    server = Server("flaky", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
