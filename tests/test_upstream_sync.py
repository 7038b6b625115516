"""Upstream tools, prompts and resources reach the registry and stay current."""

from __future__ import annotations

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import ServerState
from tests.fixtures_upstream import RecordingRegistry, echo_block, running, text_of

pytestmark = pytest.mark.anyio


async def test_every_tool_of_a_stdio_upstream_is_registered_under_its_toolset() -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, registry):
            names = registry.toolsets()["mcp-echo"]
            assert "echo" in names and "echo_add" in names
            entry = registry.get_entry("echo_add")
            assert entry is not None and entry.origin == "upstream"
            assert entry.schema["outputSchema"]["required"] == ["sum"]
            assert entry.schema["annotations"]["readOnlyHint"] is True
            assert manager.server_of_tool("echo_add") == "echo"
            status = manager.statuses()[0]
            assert status.state is ServerState.READY
            assert status.server_info == {"name": "echo", "version": "1.0.0"}
            assert status.connect_ms is not None


async def test_a_call_returns_the_upstream_result_unchanged() -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (_, registry):
            result = await registry.dispatch("echo_add", {"a": 2, "b": 3}, call=CallContext())
            assert result.structured_content == {"sum": 5}
            assert result.is_error is False
            failed = await registry.dispatch("echo_fail", {"message": "nope"}, call=CallContext())
            assert failed.is_error is True and text_of(failed) == "nope"


async def test_a_tool_added_or_removed_upstream_changes_only_that_tool() -> None:
    recording = RecordingRegistry()
    kinds: list[str] = []
    with anyio.fail_after(30):
        async with running(echo_block(), registry=recording, on_change=kinds.append) as (
            manager, registry,
        ):
            recording.calls.clear()
            kinds.clear()
            added = await registry.dispatch("echo_add_tool", {"name": "dyn"}, call=CallContext())
            assert text_of(added) == "added dyn"
            await manager.wait_until(lambda: "echo_dyn" in registry)
            assert recording.calls == [("register", "echo_dyn")]
            assert kinds == ["tools"]
            result = await registry.dispatch("echo_dyn", {"value": "x"}, call=CallContext())
            assert text_of(result) == 'dyn: {"value": "x"}'

            recording.calls.clear()
            await registry.dispatch("echo_remove_tool", {"name": "dyn"}, call=CallContext())
            await manager.wait_until(lambda: "echo_dyn" not in registry)
            assert recording.calls == [("deregister", "echo_dyn")]


async def test_every_page_of_a_paginated_tool_list_is_registered() -> None:
    body = echo_block(env={"ECHO_EXTRA_TOOLS": "25", "ECHO_PAGE_SIZE": "4"})
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            names = registry.toolsets()["mcp-echo"]
            assert len(names) == 12 + 25
            assert manager.statuses()[0].tools == 37


async def test_include_and_exclude_match_the_raw_tool_name() -> None:
    body = (echo_block("a", extra='include = ["e*", "add"]\nexclude = ["env"]')
            + echo_block("b", extra='exclude = ["*"]'))
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            assert registry.toolsets()["mcp-a"] == ["a_add", "a_echo", "a_elicit"]
            assert "mcp-b" not in registry.toolsets()
            assert manager.statuses()[1].state is ServerState.READY


async def test_prompts_are_namespaced_and_forwarded() -> None:
    with anyio.fail_after(30):
        async with running(echo_block(prefix="e")) as (manager, _):
            assert [p.name for p in manager.list_prompts()] == ["e_greet"]
            result = await manager.get_prompt("e_greet", {"name": "Ada"}, CallContext())
            content = result.messages[0].content
            assert isinstance(content, types.TextContent) and content.text == "Hello, Ada!"
            with pytest.raises(MCPError) as info:
                await manager.get_prompt("greet", None, CallContext())
            assert info.value.code == types.INVALID_PARAMS
            assert "Unknown prompt: greet" in info.value.message


async def test_resources_keep_their_uri_and_templates_route_reads() -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, _):
            assert [str(r.uri) for r in manager.list_resources()] == ["echo://hello"]
            assert [t.uri_template for t in manager.list_resource_templates()] == [
                "echo://item/{id}"]
            hello = await manager.read_resource("echo://hello", CallContext())
            item = await manager.read_resource("echo://item/7", CallContext())
            texts = [c.text for r in (hello, item) for c in r.contents
                     if isinstance(c, types.TextResourceContents)]
            assert texts == ["hello", "item 7"]
            await manager.subscribe_resource("echo://hello")
            await manager.unsubscribe_resource("echo://hello")


async def test_a_resource_uri_offered_twice_belongs_to_the_first_server() -> None:
    with anyio.fail_after(30):
        async with running(echo_block("one") + echo_block("two")) as (manager, _):
            assert [str(r.uri) for r in manager.list_resources()] == ["echo://hello"]
            statuses = {s.name: s for s in manager.statuses()}
            assert statuses["one"].shadowed_resources == []
            assert statuses["two"].shadowed_resources == ["echo://hello"]
            with pytest.raises(MCPError) as info:
                await manager.read_resource("nothing://here", CallContext())
            assert info.value.code == types.INVALID_PARAMS


async def test_logging_level_is_forwarded_and_upstream_logs_reach_the_caller() -> None:
    logged: list[tuple[str, object]] = []

    class Recorder(CallContext):
        async def log(self, level: types.LoggingLevel, data: object,
                      logger: str | None = None) -> None:
            logged.append((level, data))

    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, registry):
            await manager.set_logging_level("debug")
            result = await registry.dispatch("echo_log", {"message": "hi", "level": "warning"},
                                             call=Recorder())
            assert text_of(result) == "logged"
            assert logged == [("warning", "hi")]


async def test_upstream_logs_with_no_call_in_flight_go_to_on_log() -> None:
    got = anyio.Event()
    seen: list[str] = []

    async def on_log(server: str, params: types.LoggingMessageNotificationParams) -> None:
        seen.append(server)
        got.set()

    with anyio.fail_after(30):
        async with running(echo_block(), on_log=on_log) as (manager, _):
            conn = manager.connection("echo")
            assert conn is not None
            await conn.relays.on_log(types.LoggingMessageNotificationParams(level="info", data="x"))
            await got.wait()
            assert seen == ["echo"]
