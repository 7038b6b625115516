"""2026-07-28 clients: no handshake, change notifications over ``subscriptions/listen``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from tests.hubtest import echo_server_toml, http_hub, write_config

pytestmark = pytest.mark.anyio


async def test_a_modern_client_lists_calls_and_hears_list_changed_through_listen(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, Client(hub.mcp_url, mode="2026-07-28") as client:
            assert client.protocol_version == "2026-07-28"
            names = {t.name for t in (await client.list_tools()).tools}
            assert "echo_echo" in names
            result = await client.call_tool("echo_echo", {"text": "modern"})
            assert result.content[0].text == "modern"  # type: ignore[union-attr]
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("echo_add_tool", {"name": "latecomer"})
                async for _event in sub:
                    names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
                    if "echo_latecomer" in names:
                        break
