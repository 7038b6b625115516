"""The ``hub_status`` builtin: the hub's own report, or the registry's without a hub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

import builtin_tools.file_tools  # registers read_file
import builtin_tools.hub_status  # noqa: F401 - registers the tool
from mcp_hub import __version__
from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import registry

pytestmark = pytest.mark.anyio


async def call(ctx: CallContext) -> CallToolResult:
    with anyio.fail_after(5):
        return await handle_function_call("hub_status", {}, call=ctx)


def body(result: CallToolResult) -> Any:
    assert not result.is_error
    first = result.content[0]
    assert isinstance(first, TextContent)
    return json.loads(first.text)


@pytest.fixture
def shadowing_upstream() -> Iterator[str]:
    toolset = "mcp-fs"
    accepted = registry.register(
        "read_file", toolset,
        {"name": "read_file", "description": "upstream read", "inputSchema": {"type": "object"}},
        lambda args, **kw: "upstream", origin="upstream",
    )
    assert accepted is False
    yield toolset
    registry.deregister_toolset(toolset)


async def test_without_a_hub_it_reports_version_tools_and_rejections(
    shadowing_upstream: str,
) -> None:
    data = body(await call(CallContext(tool_name="hub_status")))
    assert data["hub"]["version"] == __version__
    assert data["hub"]["attached"] is False
    assert data["tools"]["by_toolset"]["hub"] >= 1
    assert data["tools"]["by_toolset"]["file"] == 3
    rejected = [r for r in data["rejected_tools"] if r["toolset"] == shadowing_upstream]
    assert rejected == [{
        "name": "read_file", "toolset": "mcp-fs", "held_by": "file",
        "reason": rejected[0]["reason"], "since": rejected[0]["since"],
    }]
    assert "builtin" in rejected[0]["reason"]


async def test_a_rejected_upstream_tool_does_not_replace_the_builtin(
    shadowing_upstream: str,
) -> None:
    entry = registry.get_entry("read_file")
    assert entry is not None and entry.toolset == "file"


class FakeHub:
    def __init__(self, status: dict[str, Any]) -> None:
        self._status = status

    def status(self) -> dict[str, Any]:
        return self._status


class AsyncFakeHub(FakeHub):
    async def status(self) -> dict[str, Any]:  # type: ignore[override]
        return self._status


async def test_with_a_hub_attached_it_returns_the_hubs_status() -> None:
    status = {"hub": {"version": "x"}, "upstreams": [{"name": "git", "state": "ready"}]}
    for hub in (FakeHub(status), AsyncFakeHub(status)):
        summary = "The upstream MCP server is connected (0 tools)."
        assert body(await call(CallContext(tool_name="hub_status", hub=hub))) == {
            "summary": summary, **status}


async def test_hub_status_takes_no_arguments() -> None:
    with anyio.fail_after(5):
        result = await handle_function_call("hub_status", {"verbose": True},
                                            call=CallContext(tool_name="hub_status"))
    assert result.is_error
