"""Exposed names: prefixes, collisions, builtins protected, long names shortened stably."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.upstream import ServerState, format_status_table
from tests.fixtures_upstream import echo_block, running, text_of
from tests.hubtest import stdio_hub

pytestmark = pytest.mark.anyio

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


async def test_two_servers_without_prefix_the_later_in_the_file_wins() -> None:
    body = (echo_block("first", prefix="", env={"ECHO_SERVER_NAME": "first"})
            + echo_block("second", prefix="", env={"ECHO_SERVER_NAME": "second"}))
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            entry = registry.get_entry("echo")
            assert entry is not None and entry.toolset == "mcp-second"
            assert manager.server_of_tool("echo") == "second"
            first = next(s for s in manager.statuses() if s.name == "first")
            assert "shadowed by toolset 'mcp-second'" in first.rejected_tools["echo"]


async def test_a_shadowed_tool_returns_when_the_server_holding_its_name_goes() -> None:
    body = echo_block("first", prefix="") + echo_block("second", prefix="")
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            second = manager.connection("second")
            assert second is not None
            await registry.dispatch("crash", {}, call=CallContext())  # kills "second"
            await manager.wait_until(
                lambda: (e := registry.get_entry("echo")) is not None
                and e.toolset == "mcp-first")
            result = await registry.dispatch("echo", {"text": "still here"}, call=CallContext())
            assert text_of(result) == "still here"


async def test_an_upstream_tool_named_like_a_builtin_is_rejected_and_reported() -> None:
    registry = ToolRegistry()

    async def builtin(args: dict[str, object], **_: object) -> str:
        return "builtin"

    registry.register("echo", "hub", {"name": "echo", "description": "mine",
                                      "inputSchema": {"type": "object"}}, builtin)
    with anyio.fail_after(30):
        async with running(echo_block(prefix=""), registry=registry) as (manager, reg):
            entry = reg.get_entry("echo")
            assert entry is not None and entry.toolset == "hub"
            status = manager.statuses()[0]
            assert status.state is ServerState.READY
            assert "echo" in status.rejected_tools
            assert "builtin" in status.rejected_tools["echo"]
            assert [r.name for r in reg.rejections] == ["echo"]
            table = format_status_table(manager.statuses())
            assert "1 tool(s) rejected: echo" in table


async def test_long_names_are_shortened_the_same_way_on_every_start() -> None:
    long_prefix = "p" * 30
    body = echo_block("svc", prefix=long_prefix,
                      env={"ECHO_TOOL_PREFIX": "a_really_long_tool_name_prefix."},
                      ) + echo_block("dots", env={"ECHO_TOOL_PREFIX": "x.y z/"})
    runs: list[list[str]] = []
    for _ in range(2):
        with anyio.fail_after(30):
            async with running(body) as (_, registry):
                runs.append(registry.names())
    assert runs[0] == runs[1]
    assert all(VALID.match(name) for name in runs[0]), runs[0]
    assert len(runs[0]) == 24
    shortened = [n for n in runs[0] if n.startswith(long_prefix)]
    assert all(len(n) == 64 for n in shortened)
    assert "dots_x_y_z_echo" in runs[0]


async def test_the_separator_and_length_come_from_the_hub_settings() -> None:
    hub = 'tool_name_separator = "-"\nmax_tool_name_length = 20'
    with anyio.fail_after(30):
        async with running(echo_block("e"), hub=hub) as (_, registry):
            names = registry.names()
            assert "e-echo" in names and "e-remove_tool" in names
            assert all(len(n) <= 20 for n in names)


async def test_a_tool_named_after_its_server_is_not_prefixed_twice() -> None:
    body = echo_block("echo") + echo_block("add")
    with anyio.fail_after(60):
        async with running(body) as (manager, registry):
            names = set(registry.names())
            assert {"echo", "echo_add", "add", "add_tool", "add_echo"} <= names
            assert not names & {"echo_echo", "add_add", "add_add_tool"}
            assert manager.server_of_tool("echo") == "echo"
            result = await registry.dispatch("echo", {"text": "once"}, call=CallContext())
            assert text_of(result) == "once"
            assert manager.server_of_tool("add") == "add"


async def test_dedupe_prefix_false_keeps_every_name_prefixed() -> None:
    with anyio.fail_after(60):
        async with running(echo_block("echo"), hub="dedupe_prefix = false") as (_, registry):
            names = set(registry.names())
            assert {"echo_echo", "echo_add"} <= names and "echo" not in names


async def test_a_name_that_repeats_the_prefix_never_takes_a_siblings_name() -> None:
    # The fixture's `echo` renamed `tool` is exposed `add_tool`; the fixture's own
    # `add_tool` would be `add_tool` too, so it keeps the doubled prefix.
    body = echo_block("add", extra='[servers.add.tools.echo]\nname = "tool"\n')
    with anyio.fail_after(60):
        async with running(body) as (_, registry):
            renamed = await registry.dispatch("add_tool", {"text": "mine"}, call=CallContext())
            assert text_of(renamed) == "mine"
            assert registry.get_entry("add_add_tool") is not None
            assert registry.get_entry("add") is not None  # `add` is the prefix itself


async def test_a_call_right_after_start_waits_for_the_server_named_like_the_tool(
        tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text("[hub]\nstartup_timeout = 30\n" + echo_block("echo"))
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            result = await session.call_tool("echo", {"text": "first"})
    assert not result.is_error and text_of(result) == "first"
