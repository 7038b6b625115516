"""The 2026-07-28 fixture on Streamable HTTP, writing its listen streams as NDJSON.

It is :mod:`tests.fixtures_upstream.modern_server` with one more tool,
``add_prompt {name}`` (announced on ``subscriptions/listen`` as a prompts list
change), behind an ASGI layer that rewrites each ``subscriptions/listen``
answer from ``text/event-stream`` into ``application/json`` holding one JSON
message a line, flushed line by line while the stream stays open, as some
servers write it. Right after the acknowledgement it writes a line that is
not JSON (``NDJSON_NOISE``), and with ``NDJSON_BIG=N`` a notification line of
N bytes after that. With ``NDJSON_CALLS=1`` every other POST answer that
would be an event stream (``tools/call progress {steps}``: its progress
notifications, then the result) is written the same way, the line that is not
JSON after its first line; with ``NDJSON_ANY_ERA=1`` it takes ``initialize``
too (a 2025-11-25 session). Usage: ``python -m tests.fixtures_upstream.ndjson_server
--port N``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import MutableMapping
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import ListenHandler, PromptsListChanged

from tests.fixtures_upstream import modern_server
from tests.fixtures_upstream.shared_tools import text, tool

NDJSON_NOISE = b"this line is not JSON\n"
PROMPTS = [types.Prompt(name="greet")]
modern_server.TOOLS.append(tool("add_prompt", {"name": {"type": "string"}}))


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams
                    ) -> types.CallToolResult | types.InputRequiredResult:
    if params.name == "add_prompt":
        PROMPTS.append(types.Prompt(name=str((params.arguments or {})["name"])))
        await modern_server.BUS.publish(PromptsListChanged())
        return text("added")
    return await modern_server.call_tool(ctx, params)


async def list_prompts(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                       ) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def build() -> Server[Any]:
    server: Server[Any] = Server(
        "ndjson", on_call_tool=call_tool, on_list_tools=modern_server.list_tools,
        on_list_prompts=list_prompts, on_get_prompt=modern_server.get_prompt,
        on_list_resources=modern_server.list_resources,
        on_read_resource=modern_server.read_resource,
        on_subscriptions_listen=ListenHandler(modern_server.BUS))
    if os.environ.get("NDJSON_ANY_ERA") != "1":
        server.middleware.append(modern_server.modern_only)
    return server


async def _body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


def _is_listen(body: bytes) -> bool:
    try:
        return bool(json.loads(body).get("method") == "subscriptions/listen")
    except (ValueError, AttributeError):
        return False


class _AsLines:
    """An SSE answer's send, turned into NDJSON lines (each event's data, then a newline)."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.pending = b""
        self.lines = 0
        self.through = False

    async def __call__(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            kinds = [v for k, v in message.get("headers", []) if k.lower() == b"content-type"]
            self.through = not any(v.startswith(b"text/event-stream") for v in kinds)
            if self.through:  # one JSON document (or no body): as it is
                await self.send(message)
                return
            headers = [(k, v) for k, v in message.get("headers", [])
                       if k.lower() not in (b"content-type", b"content-length")]
            headers.append((b"content-type", b"application/json"))
            await self.send({**message, "headers": headers})
            return
        if message["type"] != "http.response.body" or self.through:
            await self.send(message)
            return
        self.pending += message.get("body", b"").replace(b"\r\n", b"\n")
        out = b""
        while b"\n\n" in self.pending:
            block, self.pending = self.pending.split(b"\n\n", 1)
            data = b"\n".join(line[5:].lstrip() for line in block.split(b"\n")
                              if line.startswith(b"data:"))
            if data:
                out += data + b"\n" + self._extra()
        await self.send({"type": "http.response.body", "body": out,
                         "more_body": message.get("more_body", False)})

    def _extra(self) -> bytes:
        """After the acknowledgement: a line that is not JSON, and a big one if asked."""
        self.lines += 1
        if self.lines != 1:
            return b""
        size = int(os.environ.get("NDJSON_BIG", "0"))
        if not size:
            return NDJSON_NOISE
        big = {"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "info", "data": "x" * size}}
        return NDJSON_NOISE + json.dumps(big).encode() + b"\n"


def serve_http(port: int) -> None:
    """Streamable HTTP on ``127.0.0.1:port/mcp``; listen answers as NDJSON."""
    import uvicorn
    app = build().streamable_http_app(host="127.0.0.1")

    async def ndjson(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = await _body(receive)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()  # type: ignore[no-any-return]
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        as_lines = _is_listen(body) or os.environ.get("NDJSON_CALLS") == "1"
        await app(scope, replay, _AsLines(send) if as_lines else send)

    uvicorn.run(ndjson, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    serve_http(int(sys.argv[2]))
