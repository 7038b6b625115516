"""An upstream that writes its ``subscriptions/listen`` stream as newline-delimited JSON.

The upstream (:mod:`tests.fixtures_upstream.ndjson_server`) answers listen
under ``Content-Type: application/json`` with one message a line and keeps
the body open. The hub reads those lines as they arrive: its listen stream is
acknowledged, and the upstream's tools and prompts list changes reach a 2026
client's open listen stream and a 2025 client's session, with the lists
re-read. A line that is not JSON is logged under the server's name and the
stream goes on; a line over ``max_message_bytes`` is refused and the stream
opened again, with every list re-read.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged

from mcp_hub.pipeline.context import CallContext
from tests.erastest import CALLBACKS, asking_over_http
from tests.fixtures_upstream import running
from tests.hubtest import http_hub, write_config

pytestmark = pytest.mark.anyio

NDJSON = ["-m", "tests.fixtures_upstream.ndjson_server"]
BLOCK = 'protocol = "2026"\n'
LIMIT = "max_message_bytes = 2048\n"


class Changes:
    """The list-changed notifications a 2025 client's session received."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.seen.append("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self.seen.append("prompts")
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait(self, kind: str) -> None:
        while kind not in self.seen:
            await self._arrived.wait()


async def _tool_names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}


async def _prompt_names(client: Client) -> set[str]:
    return {p.name for p in (await client.list_prompts()).prompts}


async def test_a_2026_clients_listen_stream_hears_an_ndjson_upstreams_list_changes(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        async with asking_over_http(NDJSON, "nd", BLOCK) as block:
            config = write_config(tmp_path, block)
            async with http_hub(config, tmp_path) as hub, \
                    Client(hub.mcp_url, mode="auto", **CALLBACKS) as client, \
                    client.listen(tools_list_changed=True, prompts_list_changed=True) as sub:
                await client.call_tool("nd_add_tool", {"name": "late"})
                async for event in sub:
                    if event == ToolsListChanged():
                        break
                assert "nd_late" in await _tool_names(client)
                await client.call_tool("nd_add_prompt", {"name": "later"})
                async for event in sub:
                    if event == PromptsListChanged():
                        break
                assert "nd_later" in await _prompt_names(client)
            log = hub.stderr_path.read_text()
    # The line that is not JSON was reported under the server's name; the stream went on.
    assert "[nd] upstream sent a line that is not JSON on its listen stream" in log
    assert "this line is not JSON" in log


async def test_a_2025_clients_session_hears_an_ndjson_upstreams_list_changes(
    tmp_path: Path,
) -> None:
    changes = Changes()
    with anyio.fail_after(90):
        async with asking_over_http(NDJSON, "nd", BLOCK) as block:
            config = write_config(tmp_path, block)
            async with http_hub(config, tmp_path) as hub, \
                    Client(hub.mcp_url, mode="legacy", message_handler=changes,
                           **CALLBACKS) as client:
                await client.call_tool("nd_add_tool", {"name": "late"})
                await changes.wait("tools")
                assert "nd_late" in await _tool_names(client)
                await client.call_tool("nd_add_prompt", {"name": "later"})
                await changes.wait("prompts")
                assert "nd_later" in await _prompt_names(client)


async def test_a_line_over_max_message_bytes_is_refused_and_the_lists_are_read_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # After its acknowledgement the upstream writes a 4 KB line; the limit is 2 KB.
    monkeypatch.setenv("NDJSON_BIG", "4096")
    changed = anyio.Event()

    def on_change(kind: str) -> None:
        nonlocal changed
        changed.set()
        changed = anyio.Event()

    caplog.set_level(logging.WARNING, logger="mcp_hub.upstream")
    with anyio.fail_after(90):
        async with asking_over_http(NDJSON, "nd", BLOCK + LIMIT) as block, \
                running(block, hub="dedupe_prefix = false", on_change=on_change) as (manager, reg):
            conn = manager.connection("nd")
            assert conn is not None
            # Added without an announcement: only a re-read of the list finds it.
            await conn.call_tool("add_tool", {"name": "quiet_one", "quiet": True}, CallContext())
            while reg.get_entry("nd_quiet_one") is None:
                await changed.wait()
    refused = [r.getMessage() for r in caplog.records if "max_message_bytes" in r.getMessage()]
    assert refused and refused[0].startswith("[nd] upstream sent a ")
    assert "byte message on its listen stream, over max_message_bytes (2048)" in refused[0]
