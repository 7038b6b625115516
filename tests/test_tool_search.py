"""Progressive disclosure: deferral, catalog and the three bridge tools."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.plugins import HookManager
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.search.tool_search import (
    BRIDGE_NAMES,
    ToolSearchBridge,
    ToolSearchSettings,
    estimate_tokens,
    plan_exposure,
)

pytestmark = pytest.mark.anyio


def tool(name: str, description: str = "", **extra: Any) -> dict[str, Any]:
    schema = extra.pop("inputSchema", {"type": "object", "properties": {}})
    return {"name": name, "description": description, "inputSchema": schema, **extra}


def upstream_catalog(n: int = 40) -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """``n`` upstream tools on two servers plus one builtin."""
    defs = [tool("hub_status", "Status of the hub")]
    for i in range(n):
        server = "alpha" if i % 2 else "beta"
        defs.append(tool(f"{server}_tool{i:02d}", f"Does thing number {i} " + "padding " * 40))
    origins = {d["name"]: ("builtin" if d["name"] == "hub_status" else "upstream") for d in defs}
    servers = {d["name"]: d["name"].split("_", 1)[0] for d in defs if origins[d["name"]] != "builtin"}
    return defs, origins, servers


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def payload(result: CallToolResult) -> Any:
    assert not result.is_error, text_of(result)
    return json.loads(text_of(result))


# ── token estimate and deferral ───────────────────────────────────────────────


def test_tokens_are_a_quarter_of_the_compact_json_length_rounded_up() -> None:
    defs = [{"name": "x"}]
    assert estimate_tokens(defs) == 4  # [{"name":"x"}] is 14 characters
    assert estimate_tokens([]) == 1


def test_auto_mode_bridges_only_at_or_above_the_threshold() -> None:
    defs, origins, servers = upstream_catalog()
    deferrable = [d for d in defs if origins[d["name"]] == "upstream"]
    tokens = estimate_tokens(deferrable)
    at = ToolSearchSettings(context_window_tokens=tokens * 10, threshold_pct=10)
    below = ToolSearchSettings(context_window_tokens=tokens * 10 + 100, threshold_pct=10)

    plan = plan_exposure(defs, origins, servers, at)
    assert plan.active
    assert plan.deferrable_tokens == tokens
    assert plan.threshold_tokens == tokens
    assert [d["name"] for d in plan.visible] == ["hub_status", *BRIDGE_NAMES]

    plan = plan_exposure(defs, origins, servers, below)
    assert not plan.active
    assert plan.deferred == []
    assert [d["name"] for d in plan.visible] == [d["name"] for d in defs]


def test_crossing_the_threshold_back_down_restores_the_full_listing() -> None:
    defs, origins, servers = upstream_catalog()
    settings = ToolSearchSettings(context_window_tokens=5000, threshold_pct=10)
    assert plan_exposure(defs, origins, servers, settings).active
    few = defs[:3]
    plan = plan_exposure(few, origins, servers, settings)
    assert not plan.active
    assert [d["name"] for d in plan.visible] == [d["name"] for d in few]


def test_builtin_tools_are_never_deferred() -> None:
    defs, origins, servers = upstream_catalog()
    plan = plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on"))
    assert "hub_status" in [d["name"] for d in plan.visible]
    assert "hub_status" not in [d["name"] for d in plan.deferred]


def test_plugin_tools_are_deferred_like_upstream_tools() -> None:
    defs = [tool("plug_a"), tool("up_b")]
    origins = {"plug_a": "plugin", "up_b": "upstream"}
    plan = plan_exposure(defs, origins, {}, ToolSearchSettings(mode="on"))
    assert sorted(d["name"] for d in plan.deferred) == ["plug_a", "up_b"]


def test_a_tool_of_unknown_origin_stays_visible() -> None:
    plan = plan_exposure([tool("mystery")], {}, {}, ToolSearchSettings(mode="on"))
    assert plan.deferred == []


def test_always_visible_globs_keep_tools_listed() -> None:
    defs, origins, servers = upstream_catalog()
    settings = ToolSearchSettings(mode="on", always_visible=["alpha_*"])
    plan = plan_exposure(defs, origins, servers, settings)
    visible = {d["name"] for d in plan.visible}
    assert all(n in visible for n in origins if n.startswith("alpha_"))
    assert not any(d["name"].startswith("alpha_") for d in plan.deferred)


def test_anthropic_always_load_keeps_a_tool_listed() -> None:
    defs = [tool("up_pinned", _meta={"anthropic/alwaysLoad": True}), tool("up_other")]
    origins = dict.fromkeys(("up_pinned", "up_other"), "upstream")
    plan = plan_exposure(defs, origins, {}, ToolSearchSettings(mode="on"))
    assert [d["name"] for d in plan.deferred] == ["up_other"]
    assert "up_pinned" in [d["name"] for d in plan.visible]


def test_mode_on_bridges_a_small_catalog_and_mode_off_never_bridges() -> None:
    defs, origins, servers = upstream_catalog(2)
    assert plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on")).active
    big, big_origins, big_servers = upstream_catalog(400)
    off = ToolSearchSettings(mode="off", context_window_tokens=1000)
    assert not plan_exposure(big, big_origins, big_servers, off).active


def test_bridge_tools_have_the_documented_input_schemas() -> None:
    defs, origins, servers = upstream_catalog()
    plan = plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on", max_limit=25))
    by_name = {d["name"]: d for d in plan.visible}
    search = by_name["tool_search"]["inputSchema"]["properties"]
    assert search["query"]["type"] == "string"
    assert search["queries"]["maxItems"] == 7
    assert search["limit"]["maximum"] == 25
    assert by_name["tool_describe"]["inputSchema"]["properties"]["names"]["maxItems"] == 10
    call = by_name["tool_call"]["inputSchema"]
    assert call["required"] == ["name"]
    assert call["properties"]["arguments"]["type"] == "object"


# ── the catalog in tool_search's description ──────────────────────────────────


def catalog_text(defs: Sequence[Mapping[str, Any]], origins: Any, servers: Any, **kw: Any) -> str:
    plan = plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on", **kw))
    return str(next(d for d in plan.visible if d["name"] == "tool_search")["description"])


def test_the_catalog_lists_servers_with_counts_and_tool_names() -> None:
    defs, origins, servers = upstream_catalog(4)
    text = catalog_text(defs, origins, servers)
    assert "alpha (2), beta (2)" in text
    assert "- alpha: alpha_tool01, alpha_tool03" in text


def test_identical_registries_give_identical_catalog_bytes_whatever_the_order() -> None:
    defs, origins, servers = upstream_catalog()
    shuffled = list(reversed(defs))
    first = plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on"))
    second = plan_exposure(shuffled, origins, dict(reversed(servers.items())), ToolSearchSettings(mode="on"))
    tail = lambda plan: json.dumps(plan.visible[-3:], sort_keys=False).encode()  # noqa: E731
    assert tail(first) == tail(second)


def test_tool_names_stop_at_the_listing_budget_but_servers_stay() -> None:
    defs, origins, servers = upstream_catalog(200)
    text = catalog_text(defs, origins, servers, listing_max_tokens=300)
    assert "alpha (100), beta (100)" in text
    assert "alpha_tool01" not in text
    assert "not itemised" in text
    assert len(text) / 4 <= 300 + 50


# ── the bridge ───────────────────────────────────────────────────────────────


GITHUB = [
    tool(
        "github_create_issue",
        "Create a new issue in a GitHub repository",
        inputSchema={
            "type": "object",
            "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
            "required": ["title"],
        },
    ),
    tool("github_list_commits", "Get list of commits of a branch"),
    tool("time_get_current_time", "Get current time in a specific timezone"),
]
SERVERS = {"github_create_issue": "github", "github_list_commits": "github", "time_get_current_time": "time"}


class Catalog:
    """A provider whose contents a test can change, like a live registry."""

    def __init__(self, defs: list[dict[str, Any]], servers: dict[str, str]) -> None:
        self.defs, self.servers, self.generation = defs, servers, 1

    def __call__(self) -> tuple[list[dict[str, Any]], dict[str, str], int]:
        return self.defs, self.servers, self.generation

    def add(self, definition: dict[str, Any], server: str) -> None:
        self.defs = [*self.defs, definition]
        self.servers = {**self.servers, definition["name"]: server}
        self.generation += 1


async def no_reenter(name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
    raise AssertionError(f"unexpected re-entry for {name}")


async def bridge_call(bridge: ToolSearchBridge, name: str, args: dict[str, Any], reenter: Any = no_reenter) -> Any:
    with anyio.fail_after(5):
        return await bridge.handle(name, args, reenter)


def bridge(mode: str = "on", **kw: Any) -> ToolSearchBridge:
    return ToolSearchBridge(ToolSearchSettings(mode=mode, **kw), Catalog(list(GITHUB), dict(SERVERS)))  # type: ignore[arg-type]


def test_the_bridge_handles_its_three_names_only_while_active() -> None:
    on, off = bridge("on"), bridge("off")
    assert all(on.handles(n) for n in BRIDGE_NAMES)
    assert not on.handles("github_create_issue")
    assert not any(off.handles(n) for n in BRIDGE_NAMES)


def test_auto_mode_handles_bridge_names_only_above_the_threshold() -> None:
    tokens = estimate_tokens(GITHUB)
    assert bridge("auto", context_window_tokens=tokens * 10).handles("tool_search")
    assert not bridge("auto", context_window_tokens=tokens * 10 + 100).handles("tool_search")


async def test_tool_search_returns_ranked_matches_with_required_params() -> None:
    result = payload(await bridge_call(bridge(), "tool_search", {"query": "open an issue on github"}))
    (entry,) = result["results"]
    first = entry["matches"][0]
    assert first == {
        "name": "github_create_issue",
        "server": "github",
        "description": "Create a new issue in a GitHub repository",
        "required": ["title"],
    }


async def test_tool_search_answers_several_queries_at_once() -> None:
    args = {"queries": ["what time is it", "recent commits"], "limit": 1}
    result = payload(await bridge_call(bridge(), "tool_search", args))
    assert [r["matches"][0]["name"] for r in result["results"]] == [
        "time_get_current_time",
        "github_list_commits",
    ]


async def test_tool_search_without_a_match_lists_sources_and_a_hint() -> None:
    result = payload(await bridge_call(bridge(), "tool_search", {"query": "kubernetes pods"}))
    (entry,) = result["results"]
    assert entry["matches"] == []
    assert entry["sources"] == [{"server": "github", "tools": 2}, {"server": "time", "tools": 1}]
    assert "hint" in entry


async def test_tool_search_caps_the_limit_and_refuses_too_many_queries() -> None:
    b = bridge(max_limit=2)
    result = payload(await bridge_call(b, "tool_search", {"query": "get", "limit": "50"}))
    assert len(result["results"][0]["matches"]) <= 2
    refused = await bridge_call(b, "tool_search", {"queries": [f"q{i}" for i in range(8)]})
    assert refused.is_error
    assert (await bridge_call(b, "tool_search", {})).is_error


async def test_tool_describe_returns_full_schemas_and_close_names_for_unknown_ones() -> None:
    args = {"names": ["github_create_issue", "github_create_isue"]}
    result = payload(await bridge_call(bridge(), "tool_describe", args))
    (described,) = result["tools"]
    assert described["inputSchema"]["required"] == ["title"]
    assert described["server"] == "github"
    assert result["not_found"] == [{"name": "github_create_isue", "close": ["github_create_issue"]}]


async def test_tool_describe_refuses_more_than_ten_names() -> None:
    result = await bridge_call(bridge(), "tool_describe", {"names": [f"t{i}" for i in range(11)]})
    assert result.is_error


async def test_tool_call_reenters_with_the_real_name_and_returns_its_result() -> None:
    seen: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    real = CallToolResult(content=[TextContent(type="text", text="created #7")])

    async def reenter(name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
        seen.append((name, args, context))
        return real

    with anyio.fail_after(5):
        result = await bridge().handle(
            "tool_call", {"name": "github_create_issue", "arguments": {"title": "t"}}, reenter, call="ctx"
        )
    assert result is real
    assert seen == [("github_create_issue", {"title": "t"}, {"call": "ctx"})]


async def test_tool_call_accepts_the_raw_upstream_name_when_it_is_unambiguous() -> None:
    seen: list[str] = []

    async def reenter(name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
        seen.append(name)
        return CallToolResult(content=[])

    await bridge_call(bridge(), "tool_call", {"name": "get_current_time", "arguments": "{}"}, reenter)
    assert seen == ["time_get_current_time"]


async def test_tool_call_refuses_a_bridge_tool_as_target() -> None:
    for name in BRIDGE_NAMES:
        result = await bridge_call(bridge(), "tool_call", {"name": name, "arguments": {}})
        assert result.is_error
        assert name in text_of(result)


async def test_tool_call_reaches_a_tool_that_appeared_after_the_listing() -> None:
    catalog = Catalog(list(GITHUB), dict(SERVERS))
    b = ToolSearchBridge(ToolSearchSettings(mode="on"), catalog)
    await bridge_call(b, "tool_search", {"query": "issue"})  # builds the index for generation 1
    catalog.add(tool("slack_post_message", "Post a message to a Slack channel"), "slack")
    seen: list[str] = []

    async def reenter(name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
        seen.append(name)
        return CallToolResult(content=[])

    found = payload(await bridge_call(b, "tool_search", {"query": "post a slack message"}))
    assert found["results"][0]["matches"][0]["name"] == "slack_post_message"
    await bridge_call(b, "tool_call", {"name": "slack_post_message", "arguments": {}}, reenter)
    assert seen == ["slack_post_message"]


def test_definitions_when_active_replace_the_catalog_with_the_bridge_tools() -> None:
    builtin = tool("hub_status", "Status")
    out = bridge().definitions_when_active([builtin, *GITHUB])
    assert [d["name"] for d in out] == ["hub_status", *BRIDGE_NAMES]


# ── through the real call pipeline ───────────────────────────────────────────


def pipeline_setup() -> tuple[ToolRegistry, ToolSearchBridge, list[tuple[str, str]]]:
    reg = ToolRegistry()
    calls: list[tuple[str, str]] = []

    async def create_issue(args: dict[str, Any], **kw: Any) -> str:
        return f"created {args['title']}"

    reg.register("github_create_issue", "mcp-github", GITHUB[0], create_issue, origin="upstream")

    def provider() -> tuple[list[dict[str, Any]], dict[str, str], int]:
        return reg.get_definitions(), {"github_create_issue": "github"}, reg.generation

    return reg, ToolSearchBridge(ToolSearchSettings(mode="on"), provider), calls


async def test_tool_call_runs_through_hooks_under_the_real_tool_name() -> None:
    reg, b, _ = pipeline_setup()
    hooks = HookManager()
    seen: list[str] = []
    hooks.register_hook("pre_tool_call", lambda tool, **kw: seen.append(tool))
    with anyio.fail_after(5):
        result = await handle_function_call(
            "tool_call",
            {"name": "github_create_issue", "arguments": {"title": "bug"}},
            registry=reg,
            hooks=hooks,
            bridge=b,
        )
    assert not result.is_error
    assert "created bug" in text_of(result)
    assert seen == ["github_create_issue"]


async def test_a_validation_error_through_tool_call_names_the_real_tools_bad_field() -> None:
    reg, b, _ = pipeline_setup()
    with anyio.fail_after(5):
        result = await handle_function_call(
            "tool_call", {"name": "github_create_issue", "arguments": {"body": "no title"}}, registry=reg, bridge=b
        )
    assert result.is_error
    text = text_of(result)
    assert "github_create_issue" in text
    assert "title" in text
