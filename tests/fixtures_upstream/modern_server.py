"""A 2026-07-28-only upstream that asks its questions in input-required rounds (stdio).

It refuses ``initialize``: only ``server/discover`` clients get in. Its tools
mirror :mod:`tests.fixtures_upstream.asking_server`, but every question is an
``InputRequiredResult`` whose ``requestState`` is the server's own (plain)
state, answered by the client re-sending the call:

``sample {prompt}``, ``elicit {message}``, ``roots``, ``two_rounds {tag}``
(an elicitation round, then a sampling round using its answer),
``progress {steps}``, ``slow {seconds, report?}``, ``events``, and ``add_tool {name, quiet?}``,
announced on ``subscriptions/listen`` (unless ``quiet`` is true).
Its ``tools/list`` carries ``ttlMs`` from ``MODERN_LIST_TTL_MS`` (default 0) and
``cacheScope`` from ``MODERN_LIST_SCOPE`` (default private). Runs on stdio, or on Streamable HTTP with
``--port N``, where ``headers`` returns the ``Mcp-Method``/``Mcp-Name`` headers of
every request it received.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

EVENTS: list[str] = []
_STR = {"type": "string"}
_FORM = {"type": "object", "properties": {"answer": _STR}, "required": ["answer"]}


def _tool(name: str, props: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} test tool.",
                      input_schema={"type": "object", "properties": props or {}})


TOOLS = [
    _tool("sample", {"prompt": _STR}), _tool("elicit", {"message": _STR}), _tool("roots"),
    _tool("two_rounds", {"tag": _STR}), _tool("progress", {"steps": {"type": "integer"}}),
    _tool("slow", {"seconds": {"type": "number"}, "report": {"type": "boolean"}}),
    _tool("events"), _tool("add_tool", {"name": _STR}), _tool("headers"),
]
#: (Mcp-Method, Mcp-Name) of every HTTP request this server received.
HEADERS: list[list[str | None]] = []
BUS = InMemorySubscriptionBus()


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _sampling(prompt: str) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(text=prompt))],
        max_tokens=50))


def _eliciting(message: str) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message, requested_schema=_FORM))


def _ask(key: str, request: Any, state: str) -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests={key: request}, request_state=state)


def _sampled(answer: Any) -> str:
    result = types.CreateMessageResult.model_validate(answer.model_dump(by_alias=True))
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else content.type
    return f"sampled[{result.model}]: {text}"


def _answer(params: types.CallToolRequestParams, key: str) -> Any:
    return (params.input_responses or {}).get(key)


async def _two_rounds(params: types.CallToolRequestParams, tag: str
                      ) -> types.CallToolResult | types.InputRequiredResult:
    state = params.request_state or ""
    if state.startswith("r2:") and _answer(params, "s") is not None:
        return _text(_sampled(_answer(params, "s")))
    elicited = _answer(params, "e")
    if state == "r1" and elicited is not None:
        name = (elicited.content or {}).get("answer", "")
        return _ask("s", _sampling(f"{tag}:{name}"), f"r2:{name}")
    return _ask("e", _eliciting(f"name for {tag}?"), "r1")


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams
                    ) -> types.CallToolResult | types.InputRequiredResult:
    args: dict[str, Any] = dict(params.arguments or {})
    name = params.name
    if name == "sample":
        answer = _answer(params, "s")
        if answer is None:
            return _ask("s", _sampling(str(args["prompt"])), "sample")
        return _text(_sampled(answer))
    if name == "elicit":
        answer = _answer(params, "e")
        if answer is None:
            return _ask("e", _eliciting(str(args["message"])), "elicit")
        return _text(json.dumps({"action": answer.action, "content": answer.content}))
    if name == "roots":
        answer = _answer(params, "r")
        if answer is None:
            return _ask("r", types.ListRootsRequest(), "roots")
        return _text(json.dumps([str(r.uri) for r in answer.roots]))
    if name == "two_rounds":
        return await _two_rounds(params, str(args["tag"]))
    if name == "progress":
        steps = int(args.get("steps", 3))
        for i in range(1, steps + 1):
            await ctx.session.report_progress(i, steps, f"step {i}")
        return _text(f"done {steps}")
    if name == "slow":
        if args.get("report"):
            await ctx.session.report_progress(0, 1, "started")
        try:
            await anyio.sleep(float(args.get("seconds", 30)))
        except anyio.get_cancelled_exc_class():
            EVENTS.append("cancelled")
            raise
        return _text("slept")
    if name == "events":
        return _text("\n".join(EVENTS))
    if name == "headers":
        return _text(json.dumps(HEADERS))
    if name == "add_tool":
        TOOLS.append(_tool(str(args["name"])))
        if not args.get("quiet"):  # quiet: only a re-list (after ttlMs) finds the new tool
            await BUS.publish(ToolsListChanged())
        return _text("added")
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                     ) -> types.ListToolsResult:
    # MODERN_LIST_TTL_MS / MODERN_LIST_SCOPE: the cache hints this server puts on its list.
    scope = "public" if os.environ.get("MODERN_LIST_SCOPE") == "public" else "private"
    return types.ListToolsResult(tools=TOOLS, ttl_ms=int(os.environ.get("MODERN_LIST_TTL_MS", "0")),
                                 cache_scope=scope)


async def modern_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Refuse the 2025 handshake: this server speaks 2026-07-28 only."""
    if ctx.method == "initialize":
        raise MCPError(types.INVALID_REQUEST, "this server speaks 2026-07-28 only")
    return await call_next(ctx)


def build() -> Server[Any]:
    server: Server[Any] = Server("modern", on_call_tool=call_tool, on_list_tools=list_tools,
                                 on_subscriptions_listen=ListenHandler(BUS))
    server.middleware.append(modern_only)
    return server


async def main() -> None:
    from mcp.server.stdio import stdio_server
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int) -> None:
    """Streamable HTTP on ``127.0.0.1:port/mcp``, recording each request's Mcp-* headers."""
    import uvicorn
    app = build().streamable_http_app(host="127.0.0.1")

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            HEADERS.append([headers.get("mcp-method"), headers.get("mcp-name")])
        await app(scope, receive, send)

    uvicorn.run(recording, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        serve_http(int(sys.argv[2]))
    else:
        anyio.run(main)
