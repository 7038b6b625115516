"""A minimal stdio MCP server in plain Python (no SDK import), for startup benchmarks.

It sleeps ``TINY_STARTUP_DELAY`` seconds (default 0), then answers
``initialize``, ``ping``, ``tools/list`` (one tool, ``echo``) and ``tools/call``.
A call of any name echoes its ``text``; with ``TINY_SERVES`` set (comma-separated
names), only ``echo`` and those names do, and any other name gets an ``isError``
result "Unknown tool: NAME", as many servers answer.
Starting it costs a bare interpreter, so a benchmark of many of them measures the
hub's concurrency rather than the import time of an MCP library.
"""

from __future__ import annotations

import json
import os
import sys
import time

TOOL = {
    "name": "echo",
    "description": "Echo the given text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def answer(message: dict[str, object]) -> dict[str, object] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    result: dict[str, object]
    if method == "initialize":
        params = message.get("params") or {}
        assert isinstance(params, dict)
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "tiny", "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        params = message.get("params") or {}
        assert isinstance(params, dict)
        args = params.get("arguments") or {}
        assert isinstance(args, dict)
        result = {"content": [{"type": "text", "text": str(args.get("text", ""))}]}
        serves = os.environ.get("TINY_SERVES")
        if serves is not None and params.get("name") not in {"echo", *serves.split(",")}:
            result = {"content": [{"type": "text", "text": f"Unknown tool: {params.get('name')}"}],
                      "isError": True}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"],
                "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    time.sleep(float(os.environ.get("TINY_STARTUP_DELAY", "0") or 0))
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
