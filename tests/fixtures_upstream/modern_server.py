"""A 2026-07-28-only upstream that asks its questions in input-required rounds (stdio).

It refuses ``initialize``: only ``server/discover`` clients get in. Its tools
mirror :mod:`tests.fixtures_upstream.asking_server`, but every question is an
``InputRequiredResult`` whose ``requestState`` is the server's own (plain)
state, answered by the client re-sending the call:

``sample {prompt}``, ``elicit {message}``, ``roots``, ``two_rounds {tag}``
(an elicitation round, then a sampling round using its answer),
``progress {steps}``, ``slow {seconds, report?}``, ``events``,
``touch {uri}`` (a resource-updated event), and ``add_tool {name, quiet?}``,
announced on ``subscriptions/listen`` (unless ``quiet`` is true; a name it already
has leaves the list as it is and is announced all the same); prompt ``greet {name}`` and
resource ``mod://info`` ask nothing. Its ``tools/list`` carries ``ttlMs`` from
``MODERN_LIST_TTL_MS`` (default 0) and ``cacheScope`` from ``MODERN_LIST_SCOPE`` (default
private). Runs on stdio, or on Streamable HTTP with
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
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError

from tests.fixtures_upstream.shared_tools import (
    FORM,
    SHARED_TOOLS,
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

TOOLS = [*SHARED_TOOLS, tool("headers"), tool("touch", {"uri": {"type": "string"}})]
#: (Mcp-Method, Mcp-Name) of every HTTP request this server received.
HEADERS: list[list[str | None]] = []
BUS = InMemorySubscriptionBus()


def _sampling(prompt: str) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(params=sampling_params(prompt))


def _eliciting(message: str) -> types.ElicitRequest:
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=message, requested_schema=FORM))


def _ask(key: str, request: Any, state: str) -> types.InputRequiredResult:
    return types.InputRequiredResult(input_requests={key: request}, request_state=state)


def _answer(params: types.CallToolRequestParams, key: str, kind: type[Any]) -> Any:
    answer = (params.input_responses or {}).get(key)
    return None if answer is None else kind.model_validate(answer.model_dump(by_alias=True))


async def _two_rounds(params: types.CallToolRequestParams, tag: str
                      ) -> types.CallToolResult | types.InputRequiredResult:
    state = params.request_state or ""
    sample = _answer(params, "s", types.CreateMessageResult)
    if state.startswith("r2:") and sample is not None:
        return text(sampled(sample))
    first = _answer(params, "e", types.ElicitResult)
    if state == "r1" and first is not None:
        prompt = two_rounds_prompt(tag, first)
        return _ask("s", _sampling(prompt), f"r2:{prompt}")
    return _ask("e", _eliciting(two_rounds_question(tag)), "r1")


async def _announce() -> None:
    await BUS.publish(ToolsListChanged())


async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams
                    ) -> types.CallToolResult | types.InputRequiredResult:
    args: dict[str, Any] = dict(params.arguments or {})
    name = params.name
    if name == "sample":
        answer = _answer(params, "s", types.CreateMessageResult)
        if answer is None:
            return _ask("s", _sampling(str(args["prompt"])), "sample")
        return text(sampled(answer))
    if name == "elicit":
        answer = _answer(params, "e", types.ElicitResult)
        if answer is None:
            return _ask("e", _eliciting(str(args["message"])), "elicit")
        return elicited(answer)
    if name == "roots":
        answer = _answer(params, "r", types.ListRootsResult)
        if answer is None:
            return _ask("r", types.ListRootsRequest(), "roots")
        return rooted(answer)
    if name == "two_rounds":
        return await _two_rounds(params, str(args["tag"]))
    if name == "headers":
        return text(json.dumps(HEADERS))
    if name == "touch":  # a resource changed: reaches listen streams that watch its URI
        await BUS.publish(ResourceUpdated(uri=str(args["uri"])))
        return text("touched")
    if name == "add_tool" and any(t.name == args["name"] for t in TOOLS):
        await _announce()  # the list stays as it was; the announcement goes all the same
        return text("unchanged")
    if name == "add_tool" and args.get("quiet"):  # only a re-list (after ttlMs) finds it
        TOOLS.append(tool(str(args["name"])))
        return text("added")
    plain = await plain_tool(ctx, name, args, _announce, TOOLS.append)
    if plain is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name}")
    return plain


async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                     ) -> types.ListToolsResult:
    # MODERN_LIST_TTL_MS / MODERN_LIST_SCOPE: the cache hints this server puts on its list.
    scope = "public" if os.environ.get("MODERN_LIST_SCOPE") == "public" else "private"
    return types.ListToolsResult(tools=TOOLS, ttl_ms=int(os.environ.get("MODERN_LIST_TTL_MS", "0")),
                                 cache_scope=scope)


async def list_prompts(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                       ) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet")])


async def get_prompt(ctx: ServerRequestContext, params: types.GetPromptRequestParams
                     ) -> types.GetPromptResult:
    who = (params.arguments or {}).get("name", "you")
    return types.GetPromptResult(messages=[types.PromptMessage(
        role="user", content=types.TextContent(text=f"hello {who}"))])


async def list_resources(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="mod://info", name="info")])


async def read_resource(ctx: ServerRequestContext, params: types.ReadResourceRequestParams
                        ) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri,
                                                                         text="info")])


async def modern_only(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Refuse the 2025 handshake: this server speaks 2026-07-28 only."""
    if ctx.method == "initialize":
        raise MCPError(types.INVALID_REQUEST, "this server speaks 2026-07-28 only")
    return await call_next(ctx)


def build() -> Server[Any]:
    server: Server[Any] = Server("modern", on_call_tool=call_tool, on_list_tools=list_tools,
                                 on_list_prompts=list_prompts, on_get_prompt=get_prompt,
                                 on_list_resources=list_resources, on_read_resource=read_resource,
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
