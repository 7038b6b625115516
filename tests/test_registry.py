"""ToolRegistry: registration, conflict policy, definitions, check_fn cache, dispatch."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from mcp_hub.registry import tool_registry as registry_module
from mcp_hub.registry.frozen import freeze
from mcp_hub.registry.results import sanitize_tool_error
from mcp_hub.registry.tool_registry import (
    FrozenDict,
    FrozenList,
    ToolEntry,
    ToolRegistry,
    input_schema_of,
    normalize_result,
    tool_error,
    tool_result,
)

pytestmark = pytest.mark.anyio


def schema(name: str = "t", description: str = "A tool.", **props: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props or {"q": {"type": "string"}}},
    }


def handler(args: dict[str, Any], **kwargs: Any) -> str:
    return "ok"


async def ahandler(args: dict[str, Any], **kwargs: Any) -> str:
    return "async ok"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


# ── ToolEntry and register ────────────────────────────────────────────────────


def test_tool_entry_uses_slots_and_has_no_instance_dict() -> None:
    entry = ToolEntry("a", "x", schema(), handler)
    assert not hasattr(entry, "__dict__")
    assert set(ToolEntry.__slots__) == {
        "name", "toolset", "schema", "handler", "check_fn", "requires_env", "is_async",
        "description", "emoji", "max_result_size_chars", "dynamic_schema_overrides", "origin",
    }
    assert "a" in repr(entry)


def test_register_rejects_a_schema_that_is_not_a_dict() -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError, match="schema must be a dict"):
        reg.register("a", "x", ["not", "a", "dict"], handler)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", ["inputSchema", "parameters"])
def test_register_rejects_a_non_dict_input_schema(key: str) -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError, match=key):
        reg.register("a", "x", {"name": "a", key: "string"}, handler)


def test_register_rejects_a_handler_that_is_not_callable() -> None:
    with pytest.raises(ValueError, match="not callable"):
        ToolRegistry().register("a", "x", schema(), "nope")  # type: ignore[arg-type]


def test_empty_description_falls_back_to_the_schema_description() -> None:
    reg = ToolRegistry()
    reg.register("a", "x", schema(description="From schema."), handler)
    reg.register("b", "x", schema(description="From schema."), handler, description="Own.")
    assert reg.get_entry("a").description == "From schema."  # type: ignore[union-attr]
    assert reg.get_entry("b").description == "Own."  # type: ignore[union-attr]


def test_origin_defaults_to_upstream_for_mcp_toolsets_and_builtin_otherwise() -> None:
    reg = ToolRegistry()
    reg.register("a", "mcp-time", schema(), handler)
    reg.register("b", "file", schema(), handler)
    reg.register("c", "extras", schema(), handler, origin="plugin")
    assert [reg.get_entry(n).origin for n in "abc"] == [  # type: ignore[union-attr]
        "upstream", "builtin", "plugin"]


def test_is_async_is_detected_from_the_handler() -> None:
    class AsyncCallable:
        async def __call__(self, args: dict[str, Any], **kw: Any) -> str:
            return "x"

    reg = ToolRegistry()
    reg.register("s", "x", schema(), handler)
    reg.register("a", "x", schema(), ahandler)
    reg.register("c", "x", schema(), AsyncCallable())
    assert reg.get_entry("s").is_async is False  # type: ignore[union-attr]
    assert reg.get_entry("a").is_async is True  # type: ignore[union-attr]
    assert reg.get_entry("c").is_async is True  # type: ignore[union-attr]


def test_same_name_in_the_same_toolset_overwrites_as_a_refresh() -> None:
    reg = ToolRegistry()
    reg.register("a", "mcp-x", schema(description="v1"), handler)
    assert reg.register("a", "mcp-x", schema(description="v2"), handler)
    assert reg.get_entry("a").description == "v2"  # type: ignore[union-attr]
    assert len(reg) == 1


def test_upstream_tool_overwrites_another_upstream_tool_with_a_debug_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()
    reg.register("a", "mcp-one", schema(), handler)
    with caplog.at_level(logging.DEBUG, logger="mcp_hub.registry.tool_registry"):
        assert reg.register("a", "mcp-two", schema(), handler)
    assert reg.get_entry("a").toolset == "mcp-two"  # type: ignore[union-attr]
    assert any(r.levelno == logging.DEBUG and "MCP over MCP" in r.message for r in caplog.records)
    assert reg.rejections == []


def test_builtin_name_is_protected_from_upstream_tool(caplog: pytest.LogCaptureFixture) -> None:
    reg = ToolRegistry()
    reg.register("read_file", "file", schema(), handler)
    with caplog.at_level(logging.ERROR, logger="mcp_hub.registry.tool_registry"):
        assert reg.register("read_file", "mcp-fs", schema(), handler) is False
    assert reg.get_entry("read_file").toolset == "file"  # type: ignore[union-attr]
    assert any(r.levelno == logging.ERROR and "REJECTED" in r.message for r in caplog.records)
    [rejection] = reg.rejections
    assert (rejection.name, rejection.toolset, rejection.holder_toolset) == (
        "read_file", "mcp-fs", "file")
    assert "builtin" in rejection.reason


def test_builtin_name_is_protected_even_when_the_upstream_asks_to_override() -> None:
    reg = ToolRegistry()
    reg.allow_tool_override = True
    reg.register("read_file", "file", schema(), handler)
    assert reg.register("read_file", "mcp-fs", schema(), handler, override=True) is False


def test_repeated_rejection_of_the_same_tool_does_not_grow_the_list() -> None:
    reg = ToolRegistry()
    reg.register("read_file", "file", schema(), handler)
    for _ in range(100):
        reg.register("read_file", "mcp-fs", schema(), handler)
    reg.register("read_file", "mcp-other", schema(), handler)
    assert [(r.name, r.toolset) for r in reg.rejections] == [
        ("read_file", "mcp-fs"), ("read_file", "mcp-other")]


def test_rejections_of_a_toolset_are_cleared_when_it_is_deregistered() -> None:
    reg = ToolRegistry()
    reg.register("read_file", "file", schema(), handler)
    reg.register("read_file", "mcp-fs", schema(), handler)
    reg.register("other", "mcp-fs", schema(), handler)
    reg.deregister_toolset("mcp-fs")
    assert reg.rejections == []


def test_builtin_takes_the_name_from_an_upstream_tool() -> None:
    reg = ToolRegistry()
    reg.register("status", "mcp-x", schema(), handler)
    assert reg.register("status", "hub", schema(), handler)
    assert reg.get_entry("status").origin == "builtin"  # type: ignore[union-attr]


def test_second_builtin_with_the_same_name_is_rejected_unless_override() -> None:
    reg = ToolRegistry()
    reg.register("tool", "one", schema(), handler)
    assert reg.register("tool", "two", schema(), handler) is False
    assert reg.register("tool", "two", schema(), handler, override=True) is True
    assert reg.get_entry("tool").toolset == "two"  # type: ignore[union-attr]


def test_plugin_cannot_replace_a_tool_without_override_and_operator_setting() -> None:
    reg = ToolRegistry()
    reg.register("read_file", "file", schema(), handler)
    with pytest.raises(PermissionError, match="allow_tool_override"):
        reg.register("read_file", "myplugin", schema(), handler, origin="plugin")
    with pytest.raises(PermissionError):
        reg.register("read_file", "myplugin", schema(), handler, origin="plugin", override=True)
    reg.allow_tool_override = True
    with pytest.raises(PermissionError):
        reg.register("read_file", "myplugin", schema(), handler, origin="plugin")
    assert reg.register("read_file", "myplugin", schema(), handler, origin="plugin",
                        override=True)
    assert reg.get_entry("read_file").origin == "plugin"  # type: ignore[union-attr]


def test_plugin_tool_is_protected_from_upstream_tool() -> None:
    reg = ToolRegistry()
    reg.register("lint", "myplugin", schema(), handler, origin="plugin")
    assert reg.register("lint", "mcp-x", schema(), handler) is False
    assert reg.rejections[0].holder_toolset == "myplugin"


def test_registering_a_rejected_tool_after_its_holder_left_succeeds_and_clears_it() -> None:
    reg = ToolRegistry()
    reg.register("x", "file", schema(), handler)
    reg.register("x", "mcp-a", schema(), handler)
    reg.deregister("x")
    assert reg.register("x", "mcp-a", schema(), handler)
    assert reg.rejections == []


# ── reading, generation, batches, listeners ───────────────────────────────────


def test_every_mutation_bumps_the_generation() -> None:
    reg = ToolRegistry()
    g0 = reg.generation
    reg.register("a", "x", schema(), handler)
    reg.register("b", "x", schema(), handler)
    assert reg.generation == g0 + 2
    assert reg.deregister("a")
    assert reg.generation == g0 + 3
    assert reg.deregister("a") is False
    assert reg.generation == g0 + 3


def test_deregister_toolset_removes_all_its_tools_with_one_generation_bump() -> None:
    reg = ToolRegistry()
    for i in range(5):
        reg.register(f"t{i}", "mcp-x", schema(), handler)
    reg.register("keep", "mcp-y", schema(), handler)
    g = reg.generation
    assert reg.deregister_toolset("mcp-x") == [f"t{i}" for i in range(5)]
    assert reg.generation == g + 1
    assert reg.names() == ["keep"]
    assert reg.deregister_toolset("mcp-x") == []
    assert reg.generation == g + 1


def test_a_batch_bumps_the_generation_and_fires_listeners_once() -> None:
    reg = ToolRegistry()
    seen: list[int] = []
    reg.add_listener(seen.append)
    g = reg.generation
    with reg.batch():
        for i in range(10):
            reg.register(f"t{i}", "mcp-x", schema(), handler)
        with reg.batch():
            reg.deregister("t0")
        assert seen == []
    assert reg.generation == g + 1
    assert seen == [g + 1]


def test_an_empty_batch_changes_nothing() -> None:
    reg = ToolRegistry()
    seen: list[int] = []
    reg.add_listener(seen.append)
    with reg.batch():
        pass
    assert seen == [] and reg.generation == 0


def test_register_many_is_one_batch_and_accepts_mappings_and_entries() -> None:
    reg = ToolRegistry()
    seen: list[int] = []
    reg.add_listener(seen.append)
    results = reg.register_many([
        {"name": "a", "toolset": "mcp-x", "schema": schema(), "handler": handler},
        ToolEntry("b", "mcp-x", schema(), ahandler, is_async=True, origin="upstream"),
    ])
    assert results == [True, True]
    assert seen == [1]
    assert reg.get_entry("b").is_async  # type: ignore[union-attr]


def test_listeners_run_outside_the_lock_and_a_failing_listener_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()
    holders: list[bool] = []

    def probe(generation: int) -> None:
        # Another thread can take the lock while the listener runs.
        acquired: list[bool] = []

        def take() -> None:
            ok = reg._lock.acquire(timeout=5)
            acquired.append(ok)
            if ok:
                reg._lock.release()

        t = threading.Thread(target=take)
        t.start()
        t.join()
        holders.append(acquired[0])

    def broken(generation: int) -> None:
        raise RuntimeError("listener bug")

    reg.add_listener(broken)
    reg.add_listener(probe)
    with caplog.at_level(logging.ERROR):
        reg.register("a", "x", schema(), handler)
    assert holders == [True]
    assert "listener" in caplog.text
    reg.remove_listener(probe)
    reg.remove_listener(probe)
    reg.register("b", "x", schema(), handler)
    assert holders == [True]


def test_snapshot_names_and_toolsets_are_copies() -> None:
    reg = ToolRegistry()
    reg.register("b", "mcp-x", schema(), handler)
    reg.register("a", "mcp-x", schema(), handler)
    reg.register("c", "file", schema(), handler)
    snap = reg.snapshot()
    reg.deregister("a")
    assert sorted(snap) == ["a", "b", "c"]
    assert reg.names() == ["b", "c"]
    assert reg.toolsets() == {"mcp-x": ["b"], "file": ["c"]}
    assert "b" in reg and "a" not in reg


def test_concurrent_register_and_deregister_while_definitions_are_read() -> None:
    reg = ToolRegistry()
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(toolset: str) -> None:
        try:
            for round_ in range(200):
                with reg.batch():
                    for i in range(10):
                        reg.register(f"{toolset}_{i}", toolset, schema(), handler)
                if round_ % 2:
                    reg.deregister_toolset(toolset)
                else:
                    reg.deregister(f"{toolset}_0")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                defs = reg.get_definitions()
                names = [d["name"] for d in defs]
                assert names == sorted(names)
                # A batch is atomic: a toolset is seen whole (10), without t_0 (9) or absent.
                for ts in ("mcp-a", "mcp-b", "mcp-c"):
                    count = sum(1 for n in names if n.startswith(ts + "_"))
                    assert count in (0, 9, 10), count
                reg.snapshot()
                reg.toolsets()
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    writers = [threading.Thread(target=writer, args=(ts,)) for ts in ("mcp-a", "mcp-b", "mcp-c")]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=60)
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert errors == []
    assert all(n.endswith(tuple(f"_{i}" for i in range(1, 10))) for n in reg.names())


# ── get_definitions ───────────────────────────────────────────────────────────


def test_definitions_are_sorted_and_normalised_to_mcp_style() -> None:
    reg = ToolRegistry()
    reg.register("zeta", "mcp-x", {
        "name": "raw_zeta", "description": "Z.", "title": "Zeta",
        "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True}, "_meta": {"k": 1},
        "icons": [{"src": "https://x/icon.png"}], "execution": {"taskSupport": "required"},
        "ignored": 1,
    }, handler)
    reg.register("alpha", "file", {
        "name": "alpha", "description": "OpenAI style.",
        "parameters": {"type": "object", "properties": {"p": {"type": "integer"}}},
    }, handler)
    reg.register("mid", "x", {"name": "mid"}, handler)
    defs = reg.get_definitions()
    assert [d["name"] for d in defs] == ["alpha", "mid", "zeta"]
    assert defs[0] == {"name": "alpha", "description": "OpenAI style.",
                       "inputSchema": {"type": "object", "properties": {"p": {"type": "integer"}}}}
    assert defs[1]["inputSchema"] == {"type": "object", "properties": {}}
    assert defs[1]["description"] == ""
    assert defs[2] == {
        "name": "zeta", "description": "Z.", "title": "Zeta", "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True},
        "_meta": {"k": 1}, "icons": [{"src": "https://x/icon.png"}],
        "execution": {"taskSupport": "required"},
    }


def test_definitions_can_be_restricted_to_names() -> None:
    reg = ToolRegistry()
    for n in "abc":
        reg.register(n, "x", schema(), handler)
    assert [d["name"] for d in reg.get_definitions(["c", "a", "missing"])] == ["a", "c"]
    assert reg.get_definitions([]) == []


def test_definitions_are_cached_until_the_generation_changes() -> None:
    reg = ToolRegistry()
    calls = 0

    def overrides() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {}

    reg.register("a", "x", schema(), handler, dynamic_schema_overrides=overrides)
    reg.get_definitions()
    reg.get_definitions()
    assert calls == 1
    reg.get_definitions(cache_key="other-config")
    assert calls == 2
    reg.register("b", "x", schema(), handler)
    reg.get_definitions()
    assert calls == 3


def test_definitions_cache_is_an_lru_of_eight() -> None:
    reg = ToolRegistry()
    reg.register("a", "x", schema(), handler)
    for i in range(20):
        reg.get_definitions(cache_key=i)
    assert len(reg.definitions) == 8


def test_mutating_returned_definitions_cannot_corrupt_the_cache() -> None:
    reg = ToolRegistry()
    reg.register("a", "x", schema(q={"type": "string", "enum": ["x", "y"]}), handler)
    first = reg.get_definitions()
    first[0]["name"] = "changed"
    first[0]["inputSchema"] = {}
    first.append({"name": "extra"})
    with pytest.raises(TypeError, match="deepcopy"):
        reg.get_definitions()[0]["inputSchema"]["properties"]["new"] = {}
    with pytest.raises(TypeError):
        reg.get_definitions()[0]["inputSchema"]["properties"]["q"]["enum"].append("z")
    mutable = copy.deepcopy(reg.get_definitions())
    mutable[0]["inputSchema"]["properties"]["q"]["enum"].append("z")
    assert type(mutable[0]["inputSchema"]) is dict
    again = reg.get_definitions()
    assert again == [{"name": "a", "description": "A tool.", "inputSchema": {
        "type": "object", "properties": {"q": {"type": "string", "enum": ["x", "y"]}}}}]


def test_definitions_do_not_share_data_with_the_registered_schema() -> None:
    reg = ToolRegistry()
    original = schema()
    reg.register("a", "x", original, handler)
    reg.get_definitions()
    original["inputSchema"]["properties"]["late"] = {"type": "string"}
    assert "late" not in reg.get_definitions()[0]["inputSchema"]["properties"]


def test_frozen_parts_serialise_pickle_and_copy_like_plain_data() -> None:
    import json
    import pickle

    frozen = freeze({"a": [1, {"b": (2, 3)}]})
    assert isinstance(frozen, FrozenDict) and isinstance(frozen["a"], FrozenList)
    assert json.loads(json.dumps(frozen)) == {"a": [1, {"b": [2, 3]}]}
    assert pickle.loads(pickle.dumps(frozen)) == frozen
    assert type(copy.copy(frozen)) is dict and type(copy.copy(frozen["a"])) is list
    assert type(pickle.loads(pickle.dumps(frozen["a"]))) is list
    mutations: list[Callable[[], Any]] = [
        lambda: frozen.pop("a"), lambda: frozen.update(x=1), lambda: frozen.clear(),
        lambda: frozen["a"].extend([1]), lambda: frozen["a"].sort()]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()


def test_requires_env_hides_a_tool_until_the_variable_is_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reg = ToolRegistry()
    monkeypatch.delenv("HUB_TEST_TOKEN", raising=False)
    reg.register("a", "x", schema(), handler, requires_env=["HUB_TEST_TOKEN"])
    assert reg.get_definitions() == []
    monkeypatch.setenv("HUB_TEST_TOKEN", "secret")
    assert [d["name"] for d in reg.get_definitions()] == ["a"]
    assert reg.is_available(reg.get_entry("a"))  # type: ignore[arg-type]


def test_dynamic_schema_overrides_are_merged_over_the_static_schema() -> None:
    reg = ToolRegistry()
    reg.register("a", "x", schema(), handler, dynamic_schema_overrides=lambda: {
        "description": "Up to 4 at once.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}})
    [d] = reg.get_definitions()
    assert d["description"] == "Up to 4 at once."
    assert d["inputSchema"]["properties"] == {"n": {"type": "integer"}}


def test_a_failing_dynamic_override_is_logged_and_the_static_schema_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("config missing")

    reg = ToolRegistry()
    reg.register("a", "x", schema(), handler, dynamic_schema_overrides=broken)
    with caplog.at_level(logging.ERROR):
        [d] = reg.get_definitions()
    assert d["description"] == "A tool."
    assert "dynamic_schema_overrides" in caplog.text


# ── check_fn cache ────────────────────────────────────────────────────────────


def test_check_fn_false_hides_the_tool_and_raising_counts_as_false() -> None:
    def broken() -> bool:
        raise OSError("docker not running")

    reg = ToolRegistry()
    reg.register("a", "x", schema(), handler, check_fn=lambda: False)
    reg.register("b", "x", schema(), handler, check_fn=broken)
    reg.register("c", "x", schema(), handler, check_fn=lambda: True)
    assert [d["name"] for d in reg.get_definitions()] == ["c"]


def test_each_check_fn_is_probed_once_per_pass() -> None:
    calls = 0

    def check() -> bool:
        nonlocal calls
        calls += 1
        return True

    reg = ToolRegistry()
    for i in range(20):
        reg.register(f"t{i}", "x", schema(), handler, check_fn=check)
    assert len(reg.get_definitions()) == 20
    assert calls == 1


def test_check_fn_result_is_cached_for_thirty_seconds() -> None:
    clock = Clock()
    state = {"up": True, "calls": 0}

    def check() -> bool:
        state["calls"] += 1
        return bool(state["up"])

    reg = ToolRegistry(clock=clock)
    reg.register("a", "x", schema(), handler, check_fn=check)
    assert len(reg.get_definitions()) == 1
    state["up"] = False
    clock.now += 29.9
    assert len(reg.get_definitions()) == 1
    assert state["calls"] == 1
    clock.now += 0.2  # TTL over: probe again; failure within the grace window
    assert len(reg.get_definitions()) == 1
    assert state["calls"] == 2


def test_grace_window_keeps_a_recent_success_but_probes_again_each_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    state = {"up": True, "calls": 0}

    def check() -> bool:
        state["calls"] += 1
        return bool(state["up"])

    reg = ToolRegistry(clock=clock)
    reg.register("a", "x", schema(), handler, check_fn=check)
    assert reg.get_definitions() != []          # success at t=1000
    state["up"] = False
    clock.now += 31
    with caplog.at_level(logging.WARNING):
        assert reg.get_definitions(cache_key=1) != []   # failed probe, grace: still True
    assert "last success" in caplog.text
    assert reg.get_definitions(cache_key=2) != []       # not cached: probed again
    assert state["calls"] == 3
    clock.now += 30                                      # 61 s after the last success
    assert reg.get_definitions(cache_key=3) == []
    calls = state["calls"]
    clock.now += 10                                      # a False result is cached for 30 s
    assert reg.get_definitions(cache_key=4) == []
    assert state["calls"] == calls
    state["up"] = True
    clock.now += 30
    assert reg.get_definitions(cache_key=5) != []


def test_a_check_fn_that_never_succeeded_gets_no_grace() -> None:
    clock = Clock()
    reg = ToolRegistry(clock=clock)
    reg.register("a", "x", schema(), handler, check_fn=lambda: False)
    assert reg.get_definitions() == []


def test_invalidate_check_fn_cache_forces_a_new_probe() -> None:
    clock = Clock()
    state = {"up": True}
    reg = ToolRegistry(clock=clock)
    reg.register("a", "x", schema(), handler, check_fn=lambda: state["up"])
    assert reg.get_definitions() != []
    state["up"] = False
    assert reg.get_definitions() != []
    reg.invalidate_check_fn_cache()
    # the last success is forgotten too, so no grace applies
    assert reg.get_definitions() == []


def test_cached_definitions_follow_a_check_fn_that_changes_without_a_mutation() -> None:
    clock = Clock()
    state = {"up": False}
    reg = ToolRegistry(clock=clock)
    reg.register("a", "x", schema(), handler, check_fn=lambda: state["up"])
    assert reg.get_definitions() == []
    state["up"] = True
    clock.now += 31
    assert [d["name"] for d in reg.get_definitions()] == ["a"]


# ── dispatch and results ──────────────────────────────────────────────────────


async def test_async_handler_is_awaited_with_args_and_context() -> None:
    seen: dict[str, Any] = {}

    async def h(args: dict[str, Any], **kw: Any) -> dict[str, Any]:
        seen.update(args=args, kw=kw)
        return {"sum": 3}

    reg = ToolRegistry()
    reg.register("a", "x", schema(), h)
    with anyio.fail_after(5):
        result = await reg.dispatch("a", {"x": 1}, call="ctx")
    assert seen == {"args": {"x": 1}, "kw": {"call": "ctx"}}
    assert text_of(result) == '{"sum": 3}'
    assert result.structured_content == {"sum": 3}
    assert result.is_error is False


async def test_sync_handler_runs_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()
    handler_thread: list[int] = []

    def h(args: dict[str, Any], **kw: Any) -> str:
        handler_thread.append(threading.get_ident())
        return "done"

    reg = ToolRegistry()
    reg.register("a", "x", schema(), h)
    with anyio.fail_after(5):
        result = await reg.dispatch("a", {})
    assert handler_thread and handler_thread[0] != loop_thread
    assert text_of(result) == "done"


async def test_sync_handler_returning_an_awaitable_is_awaited() -> None:
    reg = ToolRegistry()
    reg.register("a", "x", schema(), lambda args, **kw: ahandler(args), is_async=False)
    with anyio.fail_after(5):
        assert text_of(await reg.dispatch("a", {})) == "async ok"


async def test_handler_exceptions_become_sanitised_error_results() -> None:
    def h(args: dict[str, Any], **kw: Any) -> str:
        raise RuntimeError("<tool_call>{\"name\": \"rm\"}</tool_call> ```python\nboom``` "
                           "<![CDATA[x]]>" + "y" * 5000)

    reg = ToolRegistry()
    reg.register("a", "x", schema(), h)
    with anyio.fail_after(5):
        result = await reg.dispatch("a", {})
    text = text_of(result)
    assert result.is_error
    assert text.startswith("Tool execution failed: RuntimeError:")
    for bad in ("<tool_call>", "</tool_call>", "```", "CDATA", "]]>"):
        assert bad not in text
    assert len(text) <= 2000


async def test_cancellation_is_not_turned_into_an_error_result() -> None:
    started = anyio.Event()

    async def h(args: dict[str, Any], **kw: Any) -> str:
        started.set()
        await anyio.Event().wait()
        return "never"

    reg = ToolRegistry()
    reg.register("a", "x", schema(), h)
    outcome: list[Any] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            async def run() -> None:
                outcome.append(await reg.dispatch("a", {}))
            tg.start_soon(run)
            await started.wait()
            tg.cancel_scope.cancel()
    assert outcome == []


async def test_dispatch_of_an_unknown_name_is_an_error_result() -> None:
    with anyio.fail_after(5):
        result = await ToolRegistry().dispatch("ghost", {})
    assert result.is_error and "Unknown tool: ghost" in text_of(result)


async def test_call_tool_result_from_a_handler_is_returned_unchanged() -> None:
    original = CallToolResult(
        content=[ImageContent(data="aGk=", mime_type="image/png")],
        structured_content={"k": 1}, is_error=False)
    reg = ToolRegistry()
    reg.register("a", "x", schema(), lambda args, **kw: original)
    with anyio.fail_after(5):
        assert await reg.dispatch("a", {}) is original


def test_normalize_result_handles_every_handler_return_type() -> None:
    assert text_of(normalize_result("hi")) == "hi"
    assert normalize_result(None).content == []
    listed = normalize_result([1, "a"])
    assert text_of(listed) == '[1, "a"]' and listed.structured_content is None
    assert text_of(normalize_result(7)) == "7"
    odd = normalize_result({"x": object()})
    assert "object" in text_of(odd)


def test_tool_error_and_tool_result_helpers() -> None:
    err = tool_error("bad path", path="/etc")
    assert err.is_error and text_of(err) == '{"error": "bad path", "path": "/etc"}'
    assert text_of(tool_result("plain")) == "plain"
    res = tool_result({"a": 1})
    assert text_of(res) == '{"a": 1}' and res.structured_content == {"a": 1}
    assert text_of(tool_result(text="t", structured={"s": 1})) == "t"
    assert tool_result(text="t", structured={"s": 1}).structured_content == {"s": 1}
    assert text_of(tool_result()) == ""
    assert tool_result("x", is_error=True).is_error


def test_sanitize_strips_framework_markup_and_caps_length() -> None:
    raw = "<function_calls><invoke name='x'>" "```json\n{}\n```" "<|im_start|>ok"
    assert sanitize_tool_error(raw) == "{}\nok"
    assert len(sanitize_tool_error("z" * 10_000)) == 2000


def test_input_schema_of_supports_both_styles() -> None:
    assert input_schema_of({"inputSchema": {"a": 1}}) == {"a": 1}
    assert input_schema_of({"parameters": {"b": 1}}) == {"b": 1}
    assert input_schema_of({}) == {"type": "object", "properties": {}}


def test_the_module_has_a_singleton_registry() -> None:
    assert isinstance(registry_module.registry, ToolRegistry)


def test_a_mutation_during_a_pass_gives_current_definitions_that_are_not_cached() -> None:
    reg = ToolRegistry()

    def check() -> bool:
        # Probes run outside the lock; here one changes the registry mid-pass.
        if "late" not in reg:
            reg.register("late", "x", schema(), handler)
        return True

    reg.register("a", "x", schema(), handler, check_fn=check)
    assert [d["name"] for d in reg.get_definitions()] == ["a", "late"]
    assert len(reg.definitions) == 0
    assert [d["name"] for d in reg.get_definitions()] == ["a", "late"]
    assert len(reg.definitions) == 1
