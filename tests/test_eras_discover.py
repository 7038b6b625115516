"""``server/discover`` and ``initialize`` advertise what the hub really serves.

A real hub process in front of upstreams with different capabilities; the SDK's
``Client`` in 2026-07-28 mode (``server/discover``) and in 2025 mode
(``initialize``), over stdio and Streamable HTTP. Both eras are told the same
capabilities: the hub's own (tools, logging, ``listChanged``) merged with the
upstreams' (prompts, resources, subscriptions, completions).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client

from tests.erastest import asking_toml, hub_client, modern_toml
from tests.fixtures_upstream import FIXTURES
from tests.hubtest import PY, ROOT, write_config

pytestmark = pytest.mark.anyio


def _wire(caps: Any) -> dict[str, Any]:
    wire: dict[str, Any] = caps.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


async def _capabilities(client: Client) -> dict[str, Any]:
    await client.list_tools()  # the hub has its upstreams' lists (and capabilities) now
    if client.protocol_version == "2026-07-28":
        return _wire((await client.session.discover()).capabilities)
    return _wire(client.server_capabilities)


CONFORMANCE = (f'[servers.conf]\ncommand = "{PY}"\ncwd = "{ROOT}"\n'
               'args = ["-m", "tests.fixtures.conformance_server", "--transport", "stdio"]\n')
TINY = f'[servers.tiny]\ncommand = "{PY}"\nargs = ["{FIXTURES / "tiny_server.py"}"]\n'
# asking: tools, prompts, resources (no subscribe, no completions); modern: the same, and
# subscriptions through its listen stream; tiny: tools only;
# conformance: tools, prompts, resources with subscribe, completions.
CASES = {
    "without": (asking_toml() + TINY, {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"subscribe": False, "listChanged": True}, "logging": {}}),
    "modern": (asking_toml() + modern_toml(), {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True}, "logging": {}}),
    "with": (asking_toml() + modern_toml() + CONFORMANCE, {
        "tools": {"listChanged": True}, "prompts": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True}, "logging": {},
        "completions": {}}),
    "tools only": (TINY, {"tools": {"listChanged": True}, "logging": {}}),
}


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("case", list(CASES))
async def test_discover_and_initialize_advertise_the_merged_capabilities(
    tmp_path: Path, transport: str, case: str,
) -> None:
    body, expected = CASES[case]
    config = write_config(tmp_path, body)
    with anyio.fail_after(120):
        async with hub_client(transport, "auto", config, tmp_path) as modern:
            assert modern.protocol_version == "2026-07-28"
            discovered = await _capabilities(modern)
        async with hub_client(transport, "legacy", config, tmp_path) as legacy:
            assert legacy.protocol_version != "2026-07-28"
            initialized = await _capabilities(legacy)
    assert discovered == expected
    assert initialized == expected
