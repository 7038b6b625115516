"""handle_function_call: the order and every rule of the call pipeline (docs/tools.md)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from mcp_hub.errors import UnknownToolError
from mcp_hub.pipeline import calls as pipeline
from mcp_hub.pipeline.calls import Reenter, cap_result, handle_function_call, validate_args
from mcp_hub.pipeline.plugins import HookManager
from mcp_hub.registry.tool_registry import ToolRegistry

pytestmark = pytest.mark.anyio

ADD_SCHEMA: dict[str, Any] = {
    "name": "add",
    "description": "Add two integers.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "integer"},
            "opts": {"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}},
            "items": {"type": "array", "items": {"type": "object",
                                                 "required": ["id"]}},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}


async def add(args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"sum": args["a"] + args["b"]}


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()
    r.register("add", "mcp-math", ADD_SCHEMA, add)
    return r


async def call(name: str, args: Any, **kw: Any) -> CallToolResult:
    with anyio.fail_after(5):
        return await handle_function_call(name, args, **kw)


async def test_a_valid_call_returns_the_handler_result(reg: ToolRegistry) -> None:
    result = await call("add", {"a": 2, "b": 3}, registry=reg)
    assert not result.is_error
    assert result.structured_content == {"sum": 5}


async def test_string_arguments_are_coerced_before_validation(reg: ToolRegistry) -> None:
    result = await call("add", {"a": "2", "b": "40"}, registry=reg)
    assert result.structured_content == {"sum": 42}


async def test_invalid_arguments_are_an_error_result_naming_each_field(
    reg: ToolRegistry,
) -> None:
    result = await call(
        "add",
        {"a": "two", "opts": {"mode": "warp"}, "items": [{"id": 1}, {}], "zzz": 1},
        registry=reg,
    )
    assert result.is_error
    text = text_of(result)
    assert text.startswith("Invalid arguments for tool add:")
    assert "- a: 'two' is not of type 'integer'" in text
    assert "- b: 'b' is a required property" in text
    assert "- opts.mode: 'warp' is not one of ['fast', 'slow']" in text
    assert "- items[1].id: 'id' is a required property" in text
    assert "zzz" in text


async def test_arguments_that_are_not_an_object_are_an_error_result(reg: ToolRegistry) -> None:
    result = await call("add", ["a"], registry=reg)
    assert result.is_error and "must be a JSON object" in text_of(result)


async def test_missing_arguments_mean_an_empty_object() -> None:
    reg = ToolRegistry()
    reg.register("ping", "x", {"name": "ping"}, lambda args, **kw: f"args={args}")
    assert text_of(await call("ping", None, registry=reg)) == "args={}"


async def test_unknown_tool_raises_invalid_params_with_close_names(reg: ToolRegistry) -> None:
    reg.register("add_many", "mcp-math", ADD_SCHEMA, add)
    with pytest.raises(UnknownToolError) as info:
        await call("add_man", {}, registry=reg)
    err = info.value
    assert err.code == -32602
    assert err.name == "add_man"
    assert err.suggestions == ["add_many", "add"]
    assert str(err) == "Unknown tool: add_man Did you mean: add_many, add?"
    with pytest.raises(UnknownToolError) as none:
        await call("zzzzzz", {}, registry=reg)
    assert str(none.value) == "Unknown tool: zzzzzz" and none.value.suggestions == []


async def test_the_module_registry_is_used_by_default(
    monkeypatch: pytest.MonkeyPatch, reg: ToolRegistry
) -> None:
    monkeypatch.setattr(pipeline, "default_registry", reg)
    assert (await call("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}


async def test_validators_are_compiled_once_per_tool_entry(
    reg: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    compiled: list[Any] = []
    real = pipeline.validator_for  # type: ignore[attr-defined]

    def counting(schema: Any) -> Any:
        compiled.append(schema)
        return real(schema)

    monkeypatch.setattr(pipeline, "validator_for", counting)
    for _ in range(5):
        await call("add", {"a": 1, "b": 2}, registry=reg)
    reg.register("other", "mcp-math", {"name": "other"}, add)  # unrelated change
    await call("add", {"a": 1, "b": 2}, registry=reg)
    assert len(compiled) == 1
    reg.register("add", "mcp-math", ADD_SCHEMA, add)  # refreshed entry: recompiled
    await call("add", {"a": 1, "b": 2}, registry=reg)
    assert len(compiled) == 2


async def test_a_tool_with_an_invalid_schema_is_still_callable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()
    reg.register("odd", "mcp-x", {"inputSchema": {"type": "not-a-type"}},
                 lambda args, **kw: "ran")
    reg.register("regex", "mcp-x", {"inputSchema": {"properties": {"p": {
        "type": "string", "pattern": "(unclosed"}}}}, lambda args, **kw: "ran too")
    assert text_of(await call("odd", {}, registry=reg)) == "ran"
    assert text_of(await call("regex", {"p": "x"}, registry=reg)) == "ran too"
    assert "not validated" in caplog.text


def test_validation_reports_are_capped() -> None:
    reg = ToolRegistry()
    props = {f"p{i}": {"type": "integer"} for i in range(30)}
    reg.register("wide", "x", {"inputSchema": {"properties": props}}, lambda a, **k: "")
    entry = reg.get_entry("wide")
    assert entry is not None
    problems = validate_args(reg, entry, {f"p{i}": "x" * 1000 for i in range(30)})
    assert len(problems) == 21 and problems[-1] == "… and 10 more"
    assert all(len(p) < 320 for p in problems)


# ── hooks in the pipeline ─────────────────────────────────────────────────────


async def test_pre_hook_block_becomes_an_error_result_and_post_hook_sees_blocked(
    reg: ToolRegistry,
) -> None:
    statuses: list[str] = []
    ran: list[bool] = []

    async def guarded(args: dict[str, Any], **kw: Any) -> str:
        ran.append(True)
        return "ran"

    reg.register("guarded", "mcp-math", {"name": "guarded"}, guarded)
    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda tool, args, **kw: "Denied by policy")
    hooks.register_hook("post_tool_call", lambda status, **kw: statuses.append(status))
    hooks.register_hook("transform_tool_result", lambda **kw: "never applied")
    result = await call("guarded", {}, registry=reg, hooks=hooks)
    assert result.is_error and text_of(result) == "Denied by policy"
    assert statuses == ["blocked"] and ran == []


async def test_pre_hook_can_modify_arguments(reg: ToolRegistry) -> None:
    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda tool, args, **kw: {**args, "b": 100})
    result = await call("add", {"a": 1, "b": 2}, registry=reg, hooks=hooks)
    assert result.structured_content == {"sum": 101}


async def test_post_hook_observes_status_duration_and_context(reg: ToolRegistry) -> None:
    seen: list[dict[str, Any]] = []

    async def observe(**kw: Any) -> None:
        seen.append(kw)

    def fails(args: dict[str, Any], **kw: Any) -> str:
        raise RuntimeError("nope")

    reg.register("fails", "mcp-math", {"name": "fails"}, fails)
    hooks = HookManager()
    hooks.register_hook("post_tool_call", observe)
    await call("add", {"a": 1, "b": 2}, registry=reg, hooks=hooks, call="ctx")
    await call("fails", {}, registry=reg, hooks=hooks)
    assert [s["status"] for s in seen] == ["ok", "error"]
    assert seen[0]["tool"] == "add" and seen[0]["args"] == {"a": 1, "b": 2}
    assert seen[0]["call"] == "ctx" and seen[0]["duration_ms"] >= 0
    assert seen[1]["result"].is_error


async def test_transform_hook_replaces_the_result(reg: ToolRegistry) -> None:
    hooks = HookManager()
    hooks.register_hook("transform_tool_result", lambda result, **kw: {"wrapped": True})
    result = await call("add", {"a": 1, "b": 2}, registry=reg, hooks=hooks)
    assert result.structured_content == {"wrapped": True}


async def test_the_call_context_reaches_the_handler() -> None:
    seen: dict[str, Any] = {}

    def h(args: dict[str, Any], **kw: Any) -> str:
        seen.update(kw, thread=threading.get_ident())
        return "x"

    reg = ToolRegistry()
    reg.register("h", "x", {"name": "h"}, h)
    await call("h", {}, registry=reg, call="the-call")
    assert seen["call"] == "the-call" and seen["thread"] != threading.get_ident()


# ── the bridge hook point ─────────────────────────────────────────────────────


class FakeBridge:
    def __init__(self) -> None:
        self.seen_args: list[dict[str, Any]] = []

    def handles(self, name: str) -> bool:
        return name in ("tool_call", "tool_search")

    async def handle(
        self, name: str, args: dict[str, Any], reenter: Reenter, **context: Any
    ) -> CallToolResult:
        self.seen_args.append(args)
        if name == "tool_search":
            return CallToolResult(content=[TextContent(text="z" * 500)])
        return await reenter(args["name"], args.get("arguments") or {}, **context)


async def test_the_bridge_reenters_the_pipeline_with_the_real_tool(reg: ToolRegistry) -> None:
    bridge = FakeBridge()
    seen_tools: list[str] = []
    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda tool, **kw: seen_tools.append(tool))
    reg.register("tool_call", "hub", {"inputSchema": {"properties": {"arguments": {
        "type": "object"}}}}, add)
    result = await call("tool_call", {"name": "add", "arguments": '{"a": "1", "b": 2}'},
                        registry=reg, hooks=hooks, bridge=bridge)
    assert result.structured_content == {"sum": 3}
    assert seen_tools == ["add"]  # hooks see the real name
    assert bridge.seen_args == [{"name": "add", "arguments": {"a": "1", "b": 2}}]


async def test_the_bridge_re_entry_does_not_reach_the_bridge_again(reg: ToolRegistry) -> None:
    with pytest.raises(UnknownToolError):
        await call("tool_call", {"name": "tool_call", "arguments": {"name": "add"}},
                   registry=reg, bridge=FakeBridge())


async def test_bridge_results_are_size_capped(reg: ToolRegistry) -> None:
    result = await call("tool_search", {"query": "x"}, registry=reg, bridge=FakeBridge(),
                        max_result_size_chars=100)
    assert "truncated 400 chars" in text_of(result)


async def test_a_bridge_is_ignored_for_names_it_does_not_handle(reg: ToolRegistry) -> None:
    result = await call("add", {"a": 1, "b": 1}, registry=reg, bridge=FakeBridge())
    assert result.structured_content == {"sum": 2}


# ── size cap and sanitising ───────────────────────────────────────────────────


async def test_long_text_keeps_head_and_tail_with_a_marker() -> None:
    reg = ToolRegistry()
    reg.register("big", "x", {"name": "big"}, lambda args, **kw: "H" * 600 + "T" * 600)
    result = await call("big", {}, registry=reg, max_result_size_chars=1000)
    text = text_of(result)
    assert text.startswith("H" * 500) and text.endswith("T" * 500)
    assert "\n…[truncated 200 chars]…\n" in text


async def test_per_tool_max_result_size_overrides_the_default() -> None:
    reg = ToolRegistry()
    reg.register("big", "x", {"name": "big"}, lambda args, **kw: "x" * 300,
                 max_result_size_chars=100)
    assert "truncated 200 chars" in text_of(await call("big", {}, registry=reg))


async def test_results_under_the_limit_are_returned_unchanged() -> None:
    original = CallToolResult(content=[TextContent(text="small")])
    reg = ToolRegistry()
    reg.register("t", "x", {"name": "t"}, lambda args, **kw: original)
    assert await call("t", {}, registry=reg) is original


def test_the_cap_shares_the_budget_across_text_blocks_and_keeps_other_content() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    result = CallToolResult(
        content=[TextContent(text="a" * 3000), image, TextContent(text="b" * 1000),
                 TextContent(text="")],
        structured_content={"k": 1}, is_error=True)
    capped = cap_result(result, 400)
    texts = [b.text for b in capped.content if isinstance(b, TextContent)]
    assert "truncated 2700 chars" in texts[0] and "truncated 900 chars" in texts[1]
    assert capped.content[1] is image
    assert capped.structured_content == {"k": 1} and capped.is_error
    assert text_of(result) == "a" * 3000  # the original is untouched
    tiny = cap_result(CallToolResult(content=[TextContent(text="abc")]), 0)
    assert text_of(tiny) == "\n…[truncated 3 chars]…\n"


async def test_handler_errors_reach_the_client_sanitised() -> None:
    def h(args: dict[str, Any], **kw: Any) -> str:
        raise ValueError("<tool_call>evil</tool_call> ```x```")

    reg = ToolRegistry()
    reg.register("h", "x", {"name": "h"}, h)
    result = await call("h", {}, registry=reg)
    assert result.is_error
    assert text_of(result) == "Tool execution failed: ValueError: evil x"
