"""Plugins and hooks: loading, tool registration policy, pre/post/transform hooks."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from mcp_hub.pipeline import plugins
from mcp_hub.pipeline.plugins import HookManager, PluginContext, PreHookOutcome, load_plugins
from mcp_hub.registry.tool_registry import ToolRegistry

pytestmark = pytest.mark.anyio

SCHEMA: dict[str, Any] = {"name": "t", "inputSchema": {"type": "object"}}


def handler(args: dict[str, Any], **kw: Any) -> str:
    return "ok"


def result(text: str = "r") -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)])


# ── PluginContext ─────────────────────────────────────────────────────────────


def test_plugin_tools_are_recorded_as_plugin_tools() -> None:
    ctx = PluginContext(ToolRegistry(), HookManager(), {"key": "v"}, plugin_name="p")
    assert ctx.register_tool("lint", "linting", SCHEMA, handler)
    entry = ctx.registry.get_entry("lint")
    assert entry is not None and entry.origin == "plugin"
    assert ctx.tools == ["lint"]


def test_plugin_override_needs_both_the_flag_and_the_operator_setting() -> None:
    reg = ToolRegistry()
    reg.register("read_file", "file", SCHEMA, handler)
    ctx = PluginContext(reg, HookManager())
    with pytest.raises(PermissionError):
        ctx.register_tool("read_file", "myfs", SCHEMA, handler)
    with pytest.raises(PermissionError):
        ctx.register_tool("read_file", "myfs", SCHEMA, handler, override=True)
    reg.allow_tool_override = True
    assert ctx.register_tool("read_file", "myfs", SCHEMA, handler, override=True)
    assert reg.get_entry("read_file").toolset == "myfs"  # type: ignore[union-attr]


def test_plugin_context_registers_hooks_on_the_manager() -> None:
    hooks = HookManager()
    ctx = PluginContext(ToolRegistry(), hooks)
    ctx.register_hook("post_tool_call", lambda **kw: None)
    assert hooks.has("post_tool_call") and not hooks.has("pre_tool_call")
    assert len(hooks.hooks("post_tool_call")) == 1


def test_unknown_hook_names_and_non_callables_are_refused() -> None:
    hooks = HookManager()
    with pytest.raises(ValueError, match="unknown hook"):
        hooks.register_hook("before_call", lambda **kw: None)
    with pytest.raises(ValueError, match="not callable"):
        hooks.register_hook("pre_tool_call", 3)  # type: ignore[arg-type]


# ── hooks ─────────────────────────────────────────────────────────────────────


async def test_pre_hook_can_block_with_a_message() -> None:
    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda tool, args, **kw: f"{tool} is not allowed")
    with anyio.fail_after(5):
        outcome = await hooks.run_pre("rm", {"path": "/"})
    assert outcome.blocked == "rm is not allowed"


async def test_pre_hooks_modify_arguments_in_order_and_see_the_context() -> None:
    seen: list[Any] = []

    async def add_a(tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
        seen.append(kw.get("call"))
        return {**args, "a": 1}

    def add_b(tool: str, args: dict[str, Any], **kw: Any) -> PreHookOutcome:
        return PreHookOutcome(None, {**args, "b": 2})

    hooks = HookManager()
    hooks.register_hook("pre_tool_call", add_a)
    hooks.register_hook("pre_tool_call", lambda **kw: None)
    hooks.register_hook("pre_tool_call", add_b)
    hooks.register_hook("pre_tool_call", lambda **kw: 42)  # ignored, with a warning
    with anyio.fail_after(5):
        outcome = await hooks.run_pre("t", {"x": 0}, call="ctx")
    assert outcome == PreHookOutcome(None, {"x": 0, "a": 1, "b": 2})
    assert seen == ["ctx"]


async def test_a_pre_hook_outcome_can_block() -> None:
    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda **kw: PreHookOutcome("policy", {}))
    with anyio.fail_after(5):
        assert (await hooks.run_pre("t", {})).blocked == "policy"


async def test_a_pre_hook_that_raises_blocks_the_call() -> None:
    def broken(**kw: Any) -> None:
        raise RuntimeError("policy server down")

    hooks = HookManager()
    hooks.register_hook("pre_tool_call", broken)
    with anyio.fail_after(5):
        outcome = await hooks.run_pre("t", {})
    assert outcome.blocked is not None
    assert "failed" in outcome.blocked and "policy server down" in outcome.blocked


async def test_a_pre_hook_that_times_out_blocks_the_call() -> None:
    release = threading.Event()

    def stuck(**kw: Any) -> None:
        release.wait(10)

    async def stuck_async(**kw: Any) -> None:
        await anyio.Event().wait()

    for hook in (stuck_async, stuck):
        hooks = HookManager(timeout=0.05)
        hooks.register_hook("pre_tool_call", hook)
        with anyio.fail_after(5):
            outcome = await hooks.run_pre("t", {})
        assert outcome.blocked is not None and "timed out" in outcome.blocked
    release.set()


async def test_sync_hooks_run_in_a_worker_thread() -> None:
    threads: list[int] = []
    hooks = HookManager()
    hooks.register_hook("post_tool_call", lambda **kw: threads.append(threading.get_ident()))
    with anyio.fail_after(5):
        await hooks.run_post("t", {}, result(), 1.0, "ok")
    assert threads and threads[0] != threading.get_ident()


async def test_post_hooks_observe_and_failures_are_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[dict[str, Any]] = []

    def broken(**kw: Any) -> None:
        raise ValueError("observer bug")

    async def observe(**kw: Any) -> None:
        seen.append(kw)

    hooks = HookManager()
    hooks.register_hook("post_tool_call", broken)
    hooks.register_hook("post_tool_call", observe)
    r = result()
    with caplog.at_level(logging.WARNING, logger="mcp_hub.plugins"), anyio.fail_after(5):
        await hooks.run_post("t", {"a": 1}, r, 12.5, "error", call="c")
    assert seen == [{"tool": "t", "args": {"a": 1}, "result": r, "duration_ms": 12.5,
                     "status": "error", "call": "c"}]
    assert "observer bug" in caplog.text


async def test_the_first_transform_returning_a_replacement_wins() -> None:
    class Upper:
        async def __call__(self, *, result: CallToolResult, **kw: Any) -> str:
            block = result.content[0]
            assert isinstance(block, TextContent)
            return block.text.upper()

    def broken(**kw: Any) -> None:
        raise RuntimeError("transform bug")

    hooks = HookManager()
    hooks.register_hook("transform_tool_result", broken)
    hooks.register_hook("transform_tool_result", lambda **kw: None)
    hooks.register_hook("transform_tool_result", Upper())
    hooks.register_hook("transform_tool_result", lambda **kw: "never")
    with anyio.fail_after(5):
        out = await hooks.run_transform("t", {}, result("abc"))
    assert isinstance(out.content[0], TextContent) and out.content[0].text == "ABC"


async def test_transform_without_replacement_returns_the_same_result() -> None:
    r = result()
    with anyio.fail_after(5):
        assert await HookManager().run_transform("t", {}, r) is r


async def test_a_sync_hook_returning_an_awaitable_is_awaited() -> None:
    async def later() -> str:
        return "blocked later"

    hooks = HookManager()
    hooks.register_hook("pre_tool_call", lambda **kw: later())
    with anyio.fail_after(5):
        assert (await hooks.run_pre("t", {})).blocked == "blocked later"


# ── loading ───────────────────────────────────────────────────────────────────

PLUGIN = '''
def handler(args, **kw):
    return "{name}"

def register(ctx):
    ctx.register_tool("{name}_tool", "{name}", {{"name": "{name}_tool"}}, handler)
    ctx.register_hook("post_tool_call", lambda **kw: None)
'''


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "plugins"
    d.mkdir()
    (d / "first.py").write_text(PLUGIN.format(name="first"))
    pkg = d / "second"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(PLUGIN.format(name="second"))
    (d / "broken.py").write_text("raise RuntimeError('plugin import failed')\n")
    (d / "no_register.py").write_text("X = 1\n")
    (d / "_private.py").write_text(PLUGIN.format(name="private"))
    (d / "notes.txt").write_text("ignored")
    (d / "empty_dir").mkdir()
    return d


def test_plugins_load_from_a_directory_and_failures_are_warnings(
    plugin_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reg, hooks = ToolRegistry(), HookManager()
    contexts: list[PluginContext] = []

    def factory(name: str) -> PluginContext:
        ctx = PluginContext(reg, hooks, {"plugin": name})
        contexts.append(ctx)
        return ctx

    with caplog.at_level(logging.WARNING, logger="mcp_hub.plugins"):
        loaded = load_plugins(factory, [plugin_dir, plugin_dir.parent / "missing"])
    assert loaded == ["first", "second"]
    assert reg.names() == ["first_tool", "second_tool"]
    assert all(reg.get_entry(n).origin == "plugin" for n in reg.names())  # type: ignore[union-attr]
    assert len(hooks.hooks("post_tool_call")) == 2
    assert "plugin broken failed to load" in caplog.text
    assert "plugin no_register failed to load" in caplog.text
    assert "does not exist" in caplog.text
    assert [c.plugin_name for c in contexts if c.tools] == ["first", "second"]


class FakeEntryPoint:
    def __init__(self, name: str, obj: Any) -> None:
        self.name = name
        self._obj = obj

    def load(self) -> Any:
        if isinstance(self._obj, Exception):
            raise self._obj
        return self._obj


def test_plugins_load_from_the_entry_point_group(
    monkeypatch: pytest.MonkeyPatch, plugin_dir: Path
) -> None:
    registered: list[str] = []

    def register_fn(ctx: PluginContext) -> None:
        registered.append(ctx.plugin_name)

    class ModuleLike:
        @staticmethod
        def register(ctx: PluginContext) -> None:
            registered.append("module:" + ctx.plugin_name)

    groups: list[str] = []

    def fake_entry_points(*, group: str) -> list[FakeEntryPoint]:
        groups.append(group)
        return [FakeEntryPoint("callable", register_fn), FakeEntryPoint("mod", ModuleLike),
                FakeEntryPoint("bad", ImportError("missing dependency")),
                FakeEntryPoint("first", register_fn)]

    monkeypatch.setattr(plugins, "entry_points", fake_entry_points)
    reg = ToolRegistry()
    # A factory without parameters is accepted too.
    loaded = load_plugins(lambda: PluginContext(reg, HookManager()), [plugin_dir],
                          entry_point_group="custom.group")
    assert groups == ["custom.group"]
    assert loaded == ["callable", "mod", "first", "second"]  # dir "first" is a duplicate
    assert registered == ["callable", "module:mod", "first"]
    assert "first_tool" not in reg.names() and "second_tool" in reg.names()
