"""tool_search through a real hub process in front of a real upstream (mcp-server-time)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp.types import TextContent

from tests.hubtest import stdio_hub, write_config

pytestmark = pytest.mark.anyio

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


@pytest.mark.skipif(not TIME_SERVER.exists() and not shutil.which("mcp-server-time"), reason="mcp-server-time")
async def test_a_client_finds_and_calls_an_upstream_tool_through_the_bridge(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        f'[servers.time]\ncommand = "{TIME_SERVER}"\n\n[tool_search]\nmode = "on"\n',
    )
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            assert {"tool_search", "tool_describe", "tool_call"} <= listed
            assert not any(name.startswith("time_") for name in listed)

            found = await session.call_tool("tool_search", {"query": "current time in Tokyo"})
            block = found.content[0]
            assert isinstance(block, TextContent)
            matches = json.loads(block.text)["results"][0]["matches"]
            name = matches[0]["name"]
            assert name == "time_get_current_time"

            result = await session.call_tool("tool_call", {"name": name, "arguments": {"timezone": "Asia/Tokyo"}})
            assert not result.is_error
            text = result.content[0]
            assert isinstance(text, TextContent)
            assert "Asia/Tokyo" in text.text
