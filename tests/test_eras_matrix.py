"""Both protocol eras through the hub, against a 2025-era upstream that asks questions.

For each downstream era (2025 handshake via ``mode="legacy"``, 2026-07-28 via
``mode="auto"``) and each transport (stdio, Streamable HTTP), a real hub
process sits between the SDK's ``Client`` and the asking fixture. Sampling,
elicitation (form and URL mode), roots, two questions in one call, a prompt and
a resource that ask, progress, cancel and list_changed must give exactly what a
2025 client gets talking to the fixture directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client

from tests.erastest import asking_toml, direct_client, hub_client, list_changed_arrives, text_of
from tests.hubtest import write_config

pytestmark = pytest.mark.anyio

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("sample", {"prompt": "hi"}),
    ("elicit", {"message": "your name?"}),
    ("elicit_url", {"url": "https://example.com/consent"}),
    ("roots", {}),
    ("two_rounds", {"tag": "t"}),
]


async def _answers(client: Client, prefix: str) -> dict[str, str]:
    """Every asking call, the prompt and the resource, with progress seen on the way."""
    out: dict[str, str] = {}
    for name, args in CALLS:
        out[name] = text_of(await client.call_tool(prefix + name, args))
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    out["progress"] = text_of(await client.call_tool(prefix + "progress", {"steps": 3},
                                                     progress_callback=progress))
    out["progress_seen"] = repr(seen)
    between: list[float] = []

    async def progress_between(value: float, total: float | None, message: str | None) -> None:
        between.append(value)

    # Progress sent between two questions reaches the client (on the retry's request).
    await client.call_tool(prefix + "two_rounds", {"tag": "p"}, progress_callback=progress_between)
    out["progress_between_rounds"] = repr(between)
    out["prompt"] = text_of(await client.get_prompt(prefix + "ask_prompt"
                                                    if prefix else "ask_prompt"))
    out["resource"] = text_of(await client.read_resource("ask://sampled"))
    return out


async def _reference() -> dict[str, str]:
    async with direct_client() as client:
        return await _answers(client, "")


async def _cancel_reaches_upstream(client: Client) -> None:
    """Cancel a running call; the upstream must record that it was cancelled."""
    async def events() -> str:
        return text_of(await client.call_tool("ask_events", {}))

    before = (await events()).count("cancelled")
    started = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async with anyio.create_task_group() as tg:
        async def slow() -> None:
            await client.call_tool("ask_slow", {"seconds": 60, "report": True},
                                   progress_callback=progress)
        tg.start_soon(slow)
        await started.wait()
        tg.cancel_scope.cancel()
    while (await events()).count("cancelled") <= before:
        await anyio.sleep(0.05)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_era_and_transport_gets_what_a_2025_client_gets_directly(
    tmp_path: Path, transport: str, mode: str,
) -> None:
    config = write_config(tmp_path, asking_toml())
    notes: list[types.ServerNotification] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            notes.append(message)

    with anyio.fail_after(120):
        expected = await _reference()
        async with hub_client(transport, mode, config, tmp_path,
                              message_handler=on_message) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            got = await _answers(client, "ask_")
            assert got == expected
            assert got["roots"] == '["file:///tmp/one"]'
            assert got["two_rounds"] == "sampled[m1]: echo:t:bob"
            assert got["progress_seen"] == "[1.0, 2.0, 3.0]"
            assert got["progress_between_rounds"] == "[1.0]"
            await _cancel_reaches_upstream(client)
            await list_changed_arrives(client, mode == "legacy", "ask_", f"late_{transport}")
