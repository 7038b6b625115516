"""Prepared list answers: fresh after every change, per caller, paged per generation.

An in-process hub with the echo upstream (a real subprocess) and a profile
that sees only the echo server's tools. The bytes against the SDK's own
serialisation over the wire are checked in tests/test_http_fastpath.py.
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

from mcp_hub.config.model import load_config
from mcp_hub.downstream.lists.prepared import PreparedLists, serialize_result
from mcp_hub.hub.access import EVERYONE, Caller
from mcp_hub.hub.core import Hub
from tests.hubtest import echo_server_toml, write_config

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
NARROW = Caller(profile="narrow")


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    body = echo_server_toml() + '\n[profiles.narrow]\ntoolsets = ["mcp-echo"]\n'
    config = load_config(write_config(tmp_path, body))
    async with Hub(config, load_plugin_modules=False) as running:
        with anyio.fail_after(30):
            await running.wait_ready(25)
        yield running


def names(data: bytes, field: str = "tools") -> list[str]:
    return [entry["name"] for entry in json.loads(data)[field]]


def add_tool(hub: Hub, name: str) -> None:
    async def handler(**_: Any) -> str:
        return "ok"

    hub.registry.register(name, "extra", {"name": name, "description": "x",
                                          "parameters": {"type": "object", "properties": {}}},
                          handler, is_async=True, description="x")


async def test_bytes_are_the_sdk_serialisation_compact_without_nulls(hub: Hub) -> None:
    lists = PreparedLists(hub)
    with anyio.fail_after(20):
        data = await lists.result("tools", EVERYONE, VERSION)
    expected = serialize_result("tools/list", VERSION, types.ListToolsResult(tools=hub.list_tools()))
    assert data == expected
    assert b": " not in data[:200] and b"null" not in data
    assert "echo_echo" in names(data)


async def test_a_change_is_visible_in_the_very_next_list(hub: Hub) -> None:
    lists = PreparedLists(hub)
    with anyio.fail_after(20):
        before = await lists.result("tools", EVERYONE, VERSION)
        again = await lists.result("tools", EVERYONE, VERSION)
        assert again is before  # served from the prepared bytes
        add_tool(hub, "fresh_tool")
        after = await lists.result("tools", EVERYONE, VERSION)
        assert "fresh_tool" in names(after) and "fresh_tool" not in names(before)
        prompts = await lists.result("prompts", EVERYONE, VERSION)
        hub.sessions.changed("prompts")
        assert not lists.cached("prompts", EVERYONE, VERSION)
        assert await lists.result("prompts", EVERYONE, VERSION) == prompts


async def test_profiles_never_mix(hub: Hub) -> None:
    lists = PreparedLists(hub)
    with anyio.fail_after(20):
        for _ in range(2):
            everyone = names(await lists.result("tools", EVERYONE, VERSION))
            narrow = names(await lists.result("tools", NARROW, VERSION))
            assert "hub_status" in everyone and "hub_status" not in narrow
            assert narrow and all(n.startswith("echo_") for n in narrow)


async def test_cursor_from_before_a_change_is_refused(hub: Hub) -> None:
    lists = PreparedLists(hub, page_size=3)
    with anyio.fail_after(20):
        first = json.loads(await lists.result("tools", EVERYONE, VERSION))
        cursor = first["nextCursor"]
        second = json.loads(await lists.result("tools", EVERYONE, VERSION, cursor))
        assert len(first["tools"]) == 3 and second["tools"][0]["name"] != first["tools"][0]["name"]
        add_tool(hub, "another_tool")
        with pytest.raises(MCPError) as refused:
            await lists.result("tools", EVERYONE, VERSION, cursor)
        assert refused.value.error.code == types.INVALID_PARAMS
        assert "list again without a cursor" in refused.value.error.message
        with pytest.raises(MCPError):
            await lists.result("tools", EVERYONE, VERSION, "not-a-cursor")


async def test_a_burst_of_lists_after_a_change_is_one_preparation(hub: Hub) -> None:
    lists = PreparedLists(hub)
    answers: list[bytes] = []

    async def one() -> None:
        answers.append(await lists.result("tools", EVERYONE, VERSION))

    with anyio.fail_after(20):
        await lists.result("tools", EVERYONE, VERSION)
        add_tool(hub, "burst_tool")
        before = lists.preparations
        async with anyio.create_task_group() as tg:
            for _ in range(20):
                tg.start_soon(one)
    assert lists.preparations == before + 1
    assert len(answers) == 20 and all(a is answers[0] for a in answers)
    assert "burst_tool" in names(answers[0])


async def test_the_digest_and_the_list_share_one_walk_of_the_definitions(
        hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_hub.hub.tool_listing import ToolListing

    walks: list[object] = []
    real = ToolListing.definition_steps

    def counting(listing: ToolListing, caller: Any) -> Any:
        walks.append(caller)
        return real(listing, caller)

    monkeypatch.setattr(ToolListing, "definition_steps", counting)
    add_tool(hub, "walk_once")

    async def pause() -> None:
        await anyio.lowlevel.checkpoint()

    got: list[Any] = []

    async def ask_definitions() -> None:
        got.append(await hub.tool_definitions_sliced(EVERYONE, pause))

    async def ask_tools() -> None:
        got.append(await hub.list_tools_sliced(EVERYONE, pause))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask_definitions)
            tg.start_soon(ask_tools)
            tg.start_soon(ask_definitions)
    assert len(walks) == 1  # three askers, one walk
    assert [t.name for t in hub.list_tools(EVERYONE)] == [
        t.name for t in next(g for g in got if g and isinstance(g[0], types.Tool))]
    assert "walk_once" in [d["name"] for d in got[0]]
    add_tool(hub, "walk_twice")  # a change: walked again, and seen
    with anyio.fail_after(20):
        names = [d["name"] for d in await hub.tool_definitions_sliced(EVERYONE, pause)]
    assert len(walks) == 2 and "walk_twice" in names
