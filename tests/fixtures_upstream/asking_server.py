"""A 2025-era upstream that asks its client things in the middle of calls (stdio).

Every question is a server-initiated request on the session (the 2025 way),
related to the call that caused it. Tools:

=================  ==========================================================
``sample``         ``{prompt}`` → sampling/createMessage → "sampled[model]: text"
``elicit``         ``{message}`` → form elicitation → JSON of action and content
``elicit_url``     ``{url}`` → URL-mode elicitation → JSON of the action
``roots``          → roots/list → JSON list of root URIs
``two_rounds``     ``{tag}`` → an elicitation, then a sampling request using its answer
``progress``       ``{steps}`` → progress notifications, then "done N"
``slow``           ``{seconds}`` → sleeps (cancellable), records "cancelled" if cancelled
``ask_and_record`` ``{message}`` → elicits; records what happened to the request
``events``         → the recorded events, one per line
``add_tool``       ``{name}`` adds a tool and sends tools/list_changed
=================  ==========================================================

Prompt ``ask_prompt`` elicits a name; resource ``ask://sampled`` samples.
Runs on stdio, or on Streamable HTTP with ``--port N``. Like a server that predates
2026-07-28, it answers ``server/discover`` with "method not found".
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

EVENTS: list[str] = []
_STR = {"type": "string"}
_FORM = {"type": "object", "properties": {"answer": _STR}, "required": ["answer"]}


def _tool(name: str, props: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} test tool.",
                      input_schema={"type": "object", "properties": props or {}})


TOOLS = {t.name: t for t in [
    _tool("sample", {"prompt": _STR}), _tool("elicit", {"message": _STR}),
    _tool("elicit_url", {"url": _STR}), _tool("roots"), _tool("two_rounds", {"tag": _STR}),
    _tool("progress", {"steps": {"type": "integer"}}),
    _tool("slow", {"seconds": {"type": "number"}, "report": {"type": "boolean"}}),
    _tool("ask_and_record", {"message": _STR}), _tool("events"), _tool("add_tool", {"name": _STR}),
]}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def _sample(ctx: ServerRequestContext, prompt: str) -> str:
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(text=prompt))],
        max_tokens=50, related_request_id=ctx.request_id)
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else content.type
    return f"sampled[{result.model}]: {text}"


async def _elicit(ctx: ServerRequestContext, message: str) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, _FORM, related_request_id=ctx.request_id)


async def _record(ctx: ServerRequestContext, message: str) -> types.CallToolResult:
    try:
        answer = await _elicit(ctx, message)
    except MCPError as exc:
        EVENTS.append(f"error: {exc.error.message}")
        raise
    except anyio.get_cancelled_exc_class():
        EVENTS.append("cancelled")
        raise
    EVENTS.append(f"answered: {answer.action}")
    return _text(answer.action)


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams
                    ) -> types.CallToolResult:
    args: dict[str, Any] = dict(params.arguments or {})
    name = params.name
    if name == "sample":
        return _text(await _sample(ctx, str(args["prompt"])))
    if name == "elicit":
        answer = await _elicit(ctx, str(args["message"]))
        return _text(json.dumps({"action": answer.action, "content": answer.content}))
    if name == "elicit_url":
        answer = await ctx.session.elicit_url("Please open the page", str(args["url"]), "el-1",
                                              related_request_id=ctx.request_id)
        return _text(json.dumps({"action": answer.action}))
    if name == "roots":
        roots = await ctx.session.list_roots()
        return _text(json.dumps([str(r.uri) for r in roots.roots]))
    if name == "two_rounds":
        first = await _elicit(ctx, f"name for {args['tag']}?")
        answer = (first.content or {}).get("answer", "")
        await ctx.session.report_progress(1, 2, "asked once")
        return _text(await _sample(ctx, f"{args['tag']}:{answer}"))
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
    if name == "ask_and_record":
        return await _record(ctx, str(args["message"]))
    if name == "events":
        return _text("\n".join(EVENTS))
    if name == "add_tool":
        TOOLS[str(args["name"])] = _tool(str(args["name"]))
        await ctx.session.send_tool_list_changed()
        return _text("added")
    raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                     ) -> types.ListToolsResult:
    return types.ListToolsResult(tools=list(TOOLS.values()))


async def list_prompts(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                       ) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="ask_prompt")])


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams
                     ) -> types.GetPromptResult:
    answer = await _elicit(ctx, "who is asking?")
    who = (answer.content or {}).get("answer", "")
    return types.GetPromptResult(messages=[types.PromptMessage(
        role="user", content=types.TextContent(text=f"hello {who}"))])


async def list_resources(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="ask://sampled", name="s")])


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams
                        ) -> types.ReadResourceResult:
    text = await _sample(ctx, "resource")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text=text)])


class AskingServer(Server[Any]):
    """Advertises tools/list_changed whatever options the transport asks for."""

    def create_initialization_options(
        self, notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities, extensions)


async def handshake_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Answer ``server/discover`` like a server that predates it: method not found."""
    if ctx.method == "server/discover":
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found")
    return await call_next(ctx)


def build() -> AskingServer:
    server = AskingServer(
        "asking", on_call_tool=call_tool, on_list_tools=list_tools,
        on_list_prompts=list_prompts, on_get_prompt=get_prompt,
        on_list_resources=list_resources, on_read_resource=read_resource)
    server.middleware.append(handshake_only)
    return server


async def main() -> None:
    from mcp.server.stdio import stdio_server
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve_http(port: int) -> None:
    """Streamable HTTP on ``127.0.0.1:port/mcp`` (questions are routed per request there)."""
    import uvicorn
    uvicorn.run(build().streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=port,
                log_level="warning")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--port":
        serve_http(int(sys.argv[2]))
    else:
        anyio.run(main)
