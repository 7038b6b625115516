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
``ask_then_slow``  ``{seconds}`` → elicits, records the answer, then sleeps like ``slow``
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

from tests.fixtures_upstream.shared_tools import (
    EVENTS,
    FORM,
    SHARED_TOOLS,
    STR,
    elicited,
    plain_tool,
    rooted,
    sampled,
    sampling_params,
    text,
    tool,
    two_rounds_prompt,
    two_rounds_question,
)

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

TOOLS = {t.name: t for t in [
    *SHARED_TOOLS, tool("elicit_url", {"url": STR}), tool("ask_and_record", {"message": STR}),
    tool("ask_then_slow", {"seconds": {"type": "number"}}),
]}


async def _sample(ctx: ServerRequestContext, prompt: str) -> str:
    params = sampling_params(prompt)
    result = await ctx.session.create_message(params.messages, max_tokens=params.max_tokens,
                                              related_request_id=ctx.request_id)
    return sampled(result)


async def _elicit(ctx: ServerRequestContext, message: str) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, FORM, related_request_id=ctx.request_id)


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
    return text(answer.action)


def _add(new: types.Tool) -> None:
    TOOLS[new.name] = new


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams
                    ) -> types.CallToolResult:
    args: dict[str, Any] = dict(params.arguments or {})
    name = params.name
    if name == "sample":
        return text(await _sample(ctx, str(args["prompt"])))
    if name == "elicit":
        return elicited(await _elicit(ctx, str(args["message"])))
    if name == "elicit_url":
        answer = await ctx.session.elicit_url("Please open the page", str(args["url"]), "el-1",
                                              related_request_id=ctx.request_id)
        return text(json.dumps({"action": answer.action}))
    if name == "roots":
        return rooted(await ctx.session.list_roots())
    if name == "two_rounds":
        first = await _elicit(ctx, two_rounds_question(str(args["tag"])))
        await ctx.session.report_progress(1, 2, "asked once")
        return text(await _sample(ctx, two_rounds_prompt(str(args["tag"]), first)))
    if name == "ask_and_record":
        return await _record(ctx, str(args["message"]))
    if name == "ask_then_slow":
        await _record(ctx, "go on?")
        return await call_tool(ctx, types.CallToolRequestParams(name="slow", arguments=args))
    plain = await plain_tool(ctx, name, args, ctx.session.send_tool_list_changed, _add)
    if plain is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    return plain


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
