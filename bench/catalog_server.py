"""A stdio MCP server that lists real tool catalogs, for list benchmarks.

    python bench/catalog_server.py [COUNT]

Serves the first COUNT (default 1000) tool definitions of the captured real
catalogs: ``bench/search_eval/blind/catalog.json`` (746 tools of 33 published
servers), then ``bench/search_eval/catalog.json`` (297 tools of 26 servers),
each named ``<server>_<tool>`` so names stay unique. Every tool answers a call
with its own name. Nothing is fetched: the catalogs are files in the repository.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

HERE = Path(__file__).resolve().parent
CATALOGS = (HERE / "search_eval" / "blind" / "catalog.json", HERE / "search_eval" / "catalog.json")


def real_tools(count: int) -> list[types.Tool]:
    """Up to ``count`` real tool definitions, uniquely named."""
    tools: dict[str, types.Tool] = {}
    for path in CATALOGS:
        for server, entries in json.loads(path.read_text()).items():
            for entry in entries:
                name = re.sub(r"[^A-Za-z0-9_-]", "_", f"{server}_{entry['name']}")[:60]
                if name in tools:
                    continue
                raw: dict[str, Any] = {k: v for k, v in entry.items() if v is not None}
                raw["name"] = name
                raw.setdefault("inputSchema", {"type": "object"})
                tools[name] = types.Tool.model_validate(raw)
                if len(tools) >= count:
                    return list(tools.values())
    return list(tools.values())


def main() -> None:
    tools = real_tools(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=params.name)])

    server: Server[Any] = Server("catalog", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
