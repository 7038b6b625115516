"""Lists joined from per-entry JSON: the SDK's bytes, incremental, built in slices.

An in-process hub (no upstream) holding the 1,000 real tool definitions the list
benchmark serves (``bench/catalog_server.py``), registered as an upstream would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from bench.catalog_server import real_tools
from mcp_hub.config.model import load_config
from mcp_hub.downstream.lists.fragments import Fragments, Slicer
from mcp_hub.downstream.lists.prepared import PreparedLists, serialize_result
from mcp_hub.hub.access import EVERYONE, Caller
from mcp_hub.hub.core import Hub
from tests.hubtest import write_config

pytestmark = pytest.mark.anyio

TOOLS = 1000


async def _ok(**_: Any) -> str:
    return "ok"


def register(hub: Hub, tool: types.Tool, toolset: str = "cat") -> None:
    d = tool.model_dump(by_alias=True, exclude_none=True)
    extra = {k: v for k, v in d.items() if k not in ("name", "description", "inputSchema")}
    hub.registry.register(tool.name, toolset, {"name": tool.name, "description": tool.description or "",
                                               "parameters": d["inputSchema"], **extra},
                          _ok, is_async=True, description=tool.description or "")


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    body = '[tool_search]\nmode = "off"\n\n[profiles.narrow]\ntoolsets = ["few"]\n'
    config = load_config(write_config(tmp_path, body))
    async with Hub(config, load_plugin_modules=False) as running:
        for tool in real_tools(TOOLS):
            register(running, tool)
        yield running


def sdk_bytes(hub: Hub, version: str, caller: Caller = EVERYONE, **extra: Any) -> bytes:
    """What the SDK path serialises for this list: the whole result at once."""
    return serialize_result("tools/list", version,
                            types.ListToolsResult(tools=hub.list_tools(caller), **extra))


@pytest.mark.parametrize("version", SUPPORTED_PROTOCOL_VERSIONS)
async def test_joined_fragments_equal_the_whole_result_in_every_version(hub: Hub, version: str) -> None:
    lists = PreparedLists(hub)
    with anyio.fail_after(60):
        data = await lists.result("tools", EVERYONE, version)
    ttl, scope = lists.hint("tools", EVERYONE)
    assert data == sdk_bytes(hub, version, ttl_ms=ttl, cache_scope=scope)
    assert len(json.loads(data)["tools"]) == len(hub.list_tools()) >= TOOLS
    if version == "2026-07-28":
        assert b'"ttlMs":' in data and b'"cacheScope":' in data
    else:
        assert b'"ttlMs"' not in data


async def test_pages_with_cursors_equal_the_whole_result_per_page(hub: Hub) -> None:
    lists = PreparedLists(hub, page_size=300)
    version = "2025-11-25"
    with anyio.fail_after(60):
        first = json.loads(await lists.result("tools", EVERYONE, version))
        names = [t["name"] for t in first["tools"]]
        cursor = first["nextCursor"]
        while cursor:
            page = json.loads(await lists.result("tools", EVERYONE, version, cursor))
            names += [t["name"] for t in page["tools"]]
            cursor = page.get("nextCursor")
    assert names == [t.name for t in hub.list_tools()]


async def test_a_new_generation_serialises_only_the_changed_tool(hub: Hub) -> None:
    lists = PreparedLists(hub)
    version = "2025-06-18"
    with anyio.fail_after(60):
        await lists.result("tools", EVERYONE, version)
        before = lists.fragments.serialised
        assert before == len(hub.list_tools())
        changed = real_tools(1)[0].model_copy(update={"description": "changed"})
        register(hub, changed)  # one tool replaced: a new registry entry
        register(hub, types.Tool(name="brand_new", input_schema={"type": "object"}))
        data = await lists.result("tools", EVERYONE, version)
    assert lists.fragments.serialised == before + 2
    assert data == sdk_bytes(hub, version)
    listed = {t["name"]: t for t in json.loads(data)["tools"]}
    assert listed[changed.name]["description"] == "changed" and "brand_new" in listed


async def test_preparation_yields_to_the_loop_while_it_runs(hub: Hub) -> None:
    """Other tasks run between the slices of one cold preparation (1,000 tools)."""
    lists = PreparedLists(hub)
    turns = 0
    done = anyio.Event()

    async def other_task() -> None:
        nonlocal turns
        while not done.is_set():
            turns += 1
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(other_task)
            await anyio.lowlevel.checkpoint()
            started_at = turns
            await lists.result("tools", EVERYONE, "2025-11-25")
            done.set()
    assert lists.slices > 1
    assert turns - started_at >= lists.slices - 1


async def test_a_slicer_yields_only_once_its_budget_is_spent() -> None:
    never = Slicer(budget=3600.0)
    for _ in range(100):
        await never.checkpoint()
    assert never.yields == 0
    always = Slicer(budget=0.0)
    for _ in range(5):
        await always.checkpoint()
    assert always.yields == 5


async def test_fragments_of_other_kinds_equal_the_sdk_serialisation() -> None:
    prompts = [types.Prompt(name=f"p{i}", description=f"prompt {i}",
                            arguments=[types.PromptArgument(name="x", required=True)]) for i in range(5)]
    fragments = Fragments()
    for version in SUPPORTED_PROTOCOL_VERSIONS:
        data, layout = await fragments.page("prompts", version, prompts, "c1", (5000, "public"),
                                            Slicer())
        assert layout.join() == data
        expected = serialize_result("prompts/list", version, types.ListPromptsResult(
            prompts=prompts, next_cursor="c1", ttl_ms=5000, cache_scope="public"))
        assert data == expected
    empty, layout = await fragments.page("templates", "2025-11-25", [], None, None, Slicer())
    assert layout.join() == empty and not layout.segments
    assert empty == serialize_result("resources/templates/list", "2025-11-25",
                                     types.ListResourceTemplatesResult(resource_templates=[]))


async def test_profiles_keep_their_own_lists_from_shared_fragments(hub: Hub) -> None:
    register(hub, types.Tool(name="few_only", input_schema={"type": "object"}), toolset="few")
    lists = PreparedLists(hub)
    narrow = Caller(profile="narrow")
    with anyio.fail_after(60):
        everything = json.loads(await lists.result("tools", EVERYONE, "2025-11-25"))
        few = json.loads(await lists.result("tools", narrow, "2025-11-25"))
    assert [t["name"] for t in few["tools"]] == ["few_only"]
    assert len(everything["tools"]) == len(hub.list_tools()) > TOOLS


async def test_a_cursor_from_before_a_change_is_refused(hub: Hub) -> None:
    lists = PreparedLists(hub, page_size=500)
    with anyio.fail_after(60):
        cursor = json.loads(await lists.result("tools", EVERYONE, "2025-11-25"))["nextCursor"]
        register(hub, types.Tool(name="later", input_schema={"type": "object"}))
        with pytest.raises(MCPError) as refused:
            await lists.result("tools", EVERYONE, "2025-11-25", cursor)
    assert refused.value.error.code == types.INVALID_PARAMS
    assert "list again" in refused.value.error.message


async def test_a_change_deflates_only_the_segments_around_it_and_drops_old_layouts(
        hub: Hub) -> None:
    """Through a real registry: the gzip form of a list after one change re-deflates a few
    segments, decodes to the new list, and only kept preparations keep their layouts."""
    import zlib

    from mcp_hub.downstream.lists.gzip_answer import gzip_answer

    def decoded(deflated: Any) -> bytes:
        return zlib.decompress(gzip_answer(b"[", deflated, b"]"), zlib.MAX_WBITS | 16)

    lists = PreparedLists(hub)
    with anyio.fail_after(60):
        first = await lists.result("tools", EVERYONE, "2025-11-25")
        assert decoded(await lists.deflated(first)) == b"[" + first + b"]"
        cold = lists.segments.deflated_segments
        register(hub, types.Tool(name="brand_new", input_schema={"type": "object"}))
        second = await lists.result("tools", EVERYONE, "2025-11-25")
        assert b'"brand_new"' in second and second != first
        assert decoded(await lists.deflated(second)) == b"[" + second + b"]"
    assert cold > 10 and lists.segments.deflated_segments - cold <= 5  # of some 20
    assert id(second) in lists._layouts and id(first) not in lists._layouts
    # A page no longer kept (or never prepared here) is still deflated, whole.
    assert decoded(await lists.deflated(first)) == b"[" + first + b"]"
