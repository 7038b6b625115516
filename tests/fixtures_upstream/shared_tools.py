"""The tools both asking fixtures share: one definition of each, whatever the era.

:mod:`tests.fixtures_upstream.asking_server` (2025: questions are requests on
the session) and :mod:`tests.fixtures_upstream.modern_server` (2026-07-28:
questions are input-required rounds) expose the same tools with the same
results, so a test can compare what a client gets through the hub with what it
gets directly. What does not depend on how a question is asked lives here: the
tool declarations, the answers' text, and the tools that ask nothing
(``progress``, ``slow``, ``events``, ``add_tool``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import ServerRequestContext

EVENTS: list[str] = []
STR = {"type": "string"}
FORM = {"type": "object", "properties": {"answer": STR}, "required": ["answer"]}


def tool(name: str, props: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} test tool.",
                      input_schema={"type": "object", "properties": props or {}})


#: The tools of both fixtures (each adds its own, e.g. ``elicit_url`` or ``headers``).
SHARED_TOOLS = [
    tool("sample", {"prompt": STR}), tool("elicit", {"message": STR}), tool("roots"),
    tool("two_rounds", {"tag": STR}), tool("progress", {"steps": {"type": "integer"}}),
    tool("slow", {"seconds": {"type": "number"}, "report": {"type": "boolean"}}),
    tool("events"), tool("add_tool", {"name": STR, "quiet": {"type": "boolean"}}),
]


def text(value: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=value)])


def sampling_params(prompt: str) -> types.CreateMessageRequestParams:
    return types.CreateMessageRequestParams(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(text=prompt))],
        max_tokens=50)


def sampled(result: types.CreateMessageResult) -> str:
    """The text of ``sample``: "sampled[model]: text"."""
    content = result.content
    body = content.text if isinstance(content, types.TextContent) else content.type
    return f"sampled[{result.model}]: {body}"


def elicited(answer: types.ElicitResult) -> types.CallToolResult:
    """The result of ``elicit``: the JSON of the action and the content."""
    return text(json.dumps({"action": answer.action, "content": answer.content}))


def rooted(roots: types.ListRootsResult) -> types.CallToolResult:
    """The result of ``roots``: the JSON list of the root URIs."""
    return text(json.dumps([str(r.uri) for r in roots.roots]))


def two_rounds_question(tag: str) -> str:
    return f"name for {tag}?"


def two_rounds_prompt(tag: str, first: types.ElicitResult) -> str:
    """The sampling prompt of ``two_rounds``: the tag and the elicited name."""
    return f"{tag}:{(first.content or {}).get('answer', '')}"


async def plain_tool(ctx: ServerRequestContext[Any, Any], name: str, args: dict[str, Any],
                     announce: Callable[[], Awaitable[None]],
                     tools: Callable[[types.Tool], None]) -> types.CallToolResult | None:
    """The tools that ask nothing; None for any other name.

    ``tools`` adds a tool (``add_tool``), ``announce`` tells the client the list changed.
    """
    if name == "progress":
        steps = int(args.get("steps", 3))
        for i in range(1, steps + 1):
            await ctx.session.report_progress(i, steps, f"step {i}")
        return text(f"done {steps}")
    if name == "slow":
        if args.get("report"):
            await ctx.session.report_progress(0, 1, "started")
        try:
            await anyio.sleep(float(args.get("seconds", 30)))
        except anyio.get_cancelled_exc_class():
            EVENTS.append("cancelled")
            raise
        return text("slept")
    if name == "events":
        return text("\n".join(EVENTS))
    if name == "add_tool":
        tools(tool(str(args["name"])))
        await announce()
        return text("added")
    return None
