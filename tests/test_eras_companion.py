"""A server that asks only on a handshake session, behind an ``"auto"`` upstream.

The conformance fixture speaks both eras but asks for sampling and elicitation
only the 2025 way. The hub reaches it in 2026-07-28 (``protocol = "auto"`` or
``"2026"``);
a 2025 client that can be asked gets its calls on a second, handshake session
the hub opens on the first such call (mcp_hub.upstream.sessions.companion), so it is
asked as it would be directly. A 2026-07-28 client stays on the main session.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.erastest import asking_over_http, hub_client, text_of
from tests.hubtest import write_config

pytestmark = pytest.mark.anyio

FIXTURE = ["-m", "tests.fixtures.conformance_server", "--transport", "http"]


@pytest.mark.parametrize("protocol", ["auto", "2026"])
async def test_a_2025_client_is_asked_by_an_auto_upstream_that_asks_only_on_a_handshake(
    tmp_path: Path, protocol: str,
) -> None:
    extra = f'prefix = ""\nprotocol = "{protocol}"\n'
    with anyio.fail_after(90):
        async with asking_over_http(FIXTURE, "conf", extra) as block:
            config = write_config(tmp_path, block)
            async with hub_client("http", "legacy", config, tmp_path) as client:
                sampled = await client.call_tool("test_sampling", {"prompt": "hi"})
                assert text_of(sampled) == "LLM response: echo:hi"
                asked = await client.call_tool("test_elicitation", {"message": "who?"})
                assert not asked.is_error, text_of(asked)
                again = await client.call_tool("test_sampling", {"prompt": "again"})
                assert text_of(again) == "LLM response: echo:again"
                # Plain calls keep working beside it.
                assert text_of(await client.call_tool("test_simple_text", {})) != ""
