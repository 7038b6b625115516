"""One cache layer per fact: the Hub's listings ask the registry's definition cache.

A ``check_fn`` result is cached for its TTL; after it, a flipped result must show
in ``tools/list`` and in what ``tool_search`` searches, even though no tool was
registered or removed (the registry generation did not move).
"""

from __future__ import annotations

from typing import Any

import pytest

from mcp_hub.config.model import HubConfig
from mcp_hub.hub.access import EVERYONE
from mcp_hub.hub.core import Hub
from mcp_hub.registry.definitions import CHECK_FN_GRACE_SECONDS, CHECK_FN_TTL_SECONDS
from mcp_hub.registry.tool_registry import ToolRegistry

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def schema(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.",
            "inputSchema": {"type": "object", "properties": {}}}


async def handler(args: dict[str, Any], **_: Any) -> str:
    return "ok"


async def test_a_check_fn_flip_shows_in_tools_list_after_its_ttl() -> None:
    clock = Clock()
    registry = ToolRegistry(clock=clock)
    state = {"available": True}
    registry.register("gated", "plugin-x", schema("gated"), handler,
                      check_fn=lambda: state["available"], origin="plugin")
    registry.register("plain", "plugin-x", schema("plain"), handler, origin="plugin")
    async with Hub(HubConfig(), registry=registry, load_builtins=False,
                   load_plugin_modules=False) as hub:
        assert [t.name for t in hub.list_tools()] == ["gated", "plain"]
        generation = registry.generation
        state["available"] = False
        # Inside the TTL the cached result stands.
        clock.now += CHECK_FN_TTL_SECONDS / 2
        assert [t.name for t in hub.list_tools()] == ["gated", "plain"]
        # After the TTL (and past the grace period of the last success) it is gone.
        clock.now += CHECK_FN_TTL_SECONDS + CHECK_FN_GRACE_SECONDS
        assert [t.name for t in hub.list_tools()] == ["plain"]
        assert [d["name"] for d in hub._deferred_catalog(EVERYONE)[0]] == [
            "plain"]
        # And back, once the probe passes again after the TTL.
        state["available"] = True
        clock.now += CHECK_FN_TTL_SECONDS + 1
        assert [t.name for t in hub.list_tools()] == ["gated", "plain"]
        assert registry.generation == generation  # no registry change was involved
