"""Manager lifecycle: concurrent startup, late joiners, disabled servers, hot reload."""

from __future__ import annotations

import anyio
import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.upstream import ServerState, UpstreamManager, format_status_table
from tests.fixtures_upstream import echo_block, is_state, text_of

pytestmark = pytest.mark.anyio


async def test_wait_ready_serves_what_is_ready_and_late_servers_join() -> None:
    config = parse_config(echo_block("fast") + echo_block("late", env={"ECHO_STARTUP_DELAY": "3"}))
    registry = ToolRegistry()
    kinds: list[str] = []
    with anyio.fail_after(60):
        async with UpstreamManager(config, registry, on_change=kinds.append) as manager:
            await manager.wait_until(is_state(manager, "fast", ServerState.READY))
            await manager.wait_ready(0.1)  # the late server is still starting: returns anyway
            assert not manager.initial_done
            assert "fast_echo" in registry and "late_echo" not in registry
            assert {s.name: s.state for s in manager.statuses()}["late"] is ServerState.CONNECTING
            kinds.clear()
            await manager.ready_event.wait()
            assert manager.initial_done
            assert "late_echo" in registry
            assert "tools" in kinds


async def test_a_disabled_server_is_listed_but_never_started() -> None:
    config = parse_config(echo_block("on") + echo_block("off", extra="enabled = false"))
    registry = ToolRegistry()
    with anyio.fail_after(30):
        async with UpstreamManager(config, registry) as manager:
            await manager.wait_ready(30)
            states = {s.name: s.state for s in manager.statuses()}
            assert states == {"on": ServerState.READY, "off": ServerState.DISABLED}
            assert "off_echo" not in registry
            table = format_status_table(manager.statuses())
            assert table.splitlines()[0].split() == [
                "SERVER", "STATE", "TRANSPORT", "TOOLS", "PROMPTS", "RESOURCES", "CONNECT",
                "ERROR"]
            assert "disabled" in table


async def test_apply_config_touches_only_what_changed() -> None:
    before = parse_config(echo_block("keep") + echo_block("drop") + echo_block("edit"))
    after = parse_config(echo_block("keep") + echo_block("edit", prefix="ed")
                         + echo_block("add"))
    registry = ToolRegistry()
    with anyio.fail_after(60):
        async with UpstreamManager(before, registry) as manager:
            await manager.wait_ready(30)
            keep = manager.connection("keep")
            assert keep is not None
            pid = keep.pid
            await manager.apply_config(after)
            await manager.wait_until(lambda: "add_echo" in registry and "ed_echo" in registry)
            assert manager.connection("keep") is keep and keep.pid == pid
            assert "drop_echo" not in registry and "edit_echo" not in registry
            assert [s.name for s in manager.statuses()] == ["keep", "edit", "add"]
            result = await registry.dispatch("keep_echo", {"text": "same"}, call=CallContext())
            assert text_of(result) == "same"
