"""Toolsets: static, composite, registry-only; recursion, diamonds, cycles, profiles."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mcp_hub.registry import toolsets
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.registry.toolsets import (
    TOOLSETS,
    register_composite,
    resolve_profile,
    resolve_toolset,
    unregister_composite,
)


def handler(args: dict[str, Any], **kw: Any) -> str:
    return ""


@pytest.fixture(autouse=True)
def restore_table() -> Iterator[None]:
    saved = dict(TOOLSETS)
    yield
    TOOLSETS.clear()
    TOOLSETS.update(saved)


@pytest.fixture
def reg() -> ToolRegistry:
    r = ToolRegistry()
    for name, ts in [("get_time", "mcp-time"), ("convert_time", "mcp-time"),
                     ("git_log", "mcp-git"), ("read_file", "file"), ("hub_status", "hub")]:
        r.register(name, ts, {"name": name}, handler)
    return r


def test_builtin_toolsets_are_defined_with_description_tools_and_includes() -> None:
    for name in ("hub", "clarify", "file", "terminal"):
        spec = TOOLSETS[name]
        assert spec["description"] and spec["tools"] and spec["includes"] == []


def test_a_static_toolset_resolves_to_its_tools(reg: ToolRegistry) -> None:
    assert resolve_toolset("file", reg) == {"read_file", "write_file", "search_files"}


def test_a_registry_only_toolset_resolves_from_the_registry(reg: ToolRegistry) -> None:
    assert resolve_toolset("mcp-time", reg) == {"get_time", "convert_time"}


def test_an_unknown_toolset_resolves_to_nothing(reg: ToolRegistry) -> None:
    assert resolve_toolset("nope", reg) == set()


def test_a_composite_toolset_includes_others_recursively(reg: ToolRegistry) -> None:
    register_composite("dev", ["extra_tool"], ["mcp-git", "ops"], description="Dev work")
    register_composite("ops", [], ["mcp-time"])
    assert resolve_toolset("dev", reg) == {"extra_tool", "git_log", "get_time", "convert_time"}
    assert TOOLSETS["dev"]["description"] == "Dev work"


def test_a_diamond_include_resolves_each_toolset_once(reg: ToolRegistry) -> None:
    register_composite("left", ["l"], ["base"])
    register_composite("right", ["r"], ["base"])
    register_composite("base", ["b"], ["mcp-time"])
    register_composite("top", [], ["left", "right"])
    assert resolve_toolset("top", reg) == {"l", "r", "b", "get_time", "convert_time"}


def test_a_toolset_cycle_resolves_instead_of_hanging(reg: ToolRegistry) -> None:
    register_composite("a", ["ta"], ["b"])
    register_composite("b", ["tb"], ["c"])
    register_composite("c", ["tc"], ["a", "c"])
    assert resolve_toolset("a", reg) == {"ta", "tb", "tc"}
    assert resolve_toolset("c", reg) == {"ta", "tb", "tc"}


@pytest.mark.parametrize("alias", ["all", "*"])
def test_all_and_star_mean_every_tool(reg: ToolRegistry, alias: str) -> None:
    everything = resolve_toolset(alias, reg)
    assert set(reg.names()) <= everything
    assert {"write_file", "terminal", "clarify"} <= everything


def test_a_composite_may_include_all(reg: ToolRegistry) -> None:
    register_composite("big", [], ["all"])
    assert set(reg.names()) <= resolve_toolset("big", reg)


def test_builtin_toolsets_and_aliases_cannot_be_redefined() -> None:
    for name in ("file", "all", "*"):
        with pytest.raises(ValueError, match="reserved"):
            register_composite(name, [], [])


def test_a_composite_can_be_removed_but_a_builtin_cannot() -> None:
    register_composite("tmp", ["x"], [])
    assert unregister_composite("tmp") is True
    assert unregister_composite("tmp") is False
    assert unregister_composite("file") is False
    assert "file" in TOOLSETS


def test_resolve_toolset_uses_the_module_registry_by_default(
    monkeypatch: pytest.MonkeyPatch, reg: ToolRegistry
) -> None:
    monkeypatch.setattr(toolsets, "default_registry", reg)
    assert resolve_toolset("mcp-git") == {"git_log"}


def test_a_profile_without_toolsets_or_with_all_means_everything(reg: ToolRegistry) -> None:
    assert resolve_profile([], [], reg) is None
    assert resolve_profile(["all"], [], reg) is None


def test_a_profile_unions_its_toolsets_and_subtracts_disabled_ones(reg: ToolRegistry) -> None:
    assert resolve_profile(["mcp-time", "mcp-git"], ["mcp-git"], reg) == {
        "get_time", "convert_time"}
    everything_but_time = resolve_profile(["*"], ["mcp-time"], reg)
    assert everything_but_time is not None
    assert "get_time" not in everything_but_time and "git_log" in everything_but_time
    assert resolve_profile([], ["hub"], reg) is not None
