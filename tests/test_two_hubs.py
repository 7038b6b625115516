"""Two Hubs in one process do not see each other's tools, toolsets or subscribers."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_hub.config import parse_config
from mcp_hub.hub import Hub
from mcp_hub.toolsets import TOOLSETS

pytestmark = pytest.mark.anyio

CONFIG_A = """
[toolsets.team]
tools = ["only_a"]

[profiles.team]
toolsets = ["team"]
"""


async def handler(args: dict[str, Any], **_: Any) -> str:
    return "ok"


def schema(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}}


async def test_two_hubs_in_one_process_are_separate() -> None:
    config_a = parse_config(CONFIG_A)
    config_b = parse_config("")
    async with Hub(config_a, load_builtins=False, load_plugin_modules=False) as a, \
            Hub(config_b, load_builtins=False, load_plugin_modules=False) as b:
        a.registry.register("only_a", "plugin-a", schema("only_a"), handler, origin="plugin")
        b.registry.register("only_b", "plugin-b", schema("only_b"), handler, origin="plugin")
        assert [t.name for t in a.list_tools()] == ["only_a"]
        assert [t.name for t in b.list_tools()] == ["only_b"]
        # A's composite toolset lives in A alone: not in B, not in the process-wide table.
        assert "team" in a.toolsets.snapshot()
        assert "team" not in b.toolsets.snapshot()
        assert "team" not in TOOLSETS
        assert [t.name for t in a.list_tools("team")] == ["only_a"]
        # Each hub keeps its own subscribers and sessions.
        a.resource_subscribers["x://1"] = [object()]
        assert b.resource_subscribers == {}
        assert a.sessions is not b.sessions
    assert "team" not in TOOLSETS
