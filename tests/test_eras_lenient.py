"""Upstream answers read as the specification says: an absent ``resultType`` is ``complete``.

The upstream (``tests/fixtures_upstream/bare_modern_server.py``, JSON-RPC by
hand, no SDK) speaks 2026-07-28 but leaves ``resultType`` out of its
``tools/call``, ``prompts/get``, ``resources/read`` and list results, as servers
written before the field do. Through the hub, with ``protocol = "2026"`` or
``"auto"``, clients of both eras get every content block, prompt message and
resource content it sent.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.erastest import hub_client, text_of
from tests.hubtest import PY, ROOT, write_config

pytestmark = pytest.mark.anyio

BARE = ["-m", "tests.fixtures_upstream.bare_modern_server"]


def bare_toml(protocol: str, name: str = "bare") -> str:
    """A ``[servers.NAME]`` block running the hand-written 2026-07-28 upstream over stdio."""
    return (f"[servers.{name}]\ncommand = \"{PY}\"\n"
            f"args = {[*BARE, name]!r}\n".replace("'", '"') + f'cwd = "{ROOT}"\n'
            f'protocol = "{protocol}"\n')


@pytest.mark.parametrize("protocol", ["2026", "auto"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_results_without_result_type_arrive_whole(
    tmp_path: Path, protocol: str, mode: str,
) -> None:
    config = write_config(tmp_path, bare_toml(protocol))
    with anyio.fail_after(60):
        async with hub_client("stdio", mode, config, tmp_path) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "bare_show" in names
            result = await client.call_tool("bare_show", {"text": "hi"})
            assert not result.is_error, text_of(result)
            assert text_of(result) == "shown:hi"
            assert [type(b) for b in result.content] == [types.TextContent, types.ImageContent]
            prompt = await client.get_prompt("bare_greet", {"name": "ann"})
            assert text_of(prompt) == "hello ann"
            read = await client.read_resource("bare://note")
            assert text_of(read) == "a note"


def _error_of(raised: pytest.ExceptionInfo[MCPError]) -> types.ErrorData:
    return raised.value.error


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_resource_not_found_names_the_uri_and_keeps_the_upstreams_data(
    tmp_path: Path, transport: str, mode: str,
) -> None:
    # Two upstreams serve resources, so a URI neither lists is the hub's own "not found".
    config = write_config(tmp_path, bare_toml("auto") + bare_toml("2026", name="other"))
    with anyio.fail_after(90):
        async with hub_client(transport, mode, config, tmp_path) as client:
            with pytest.raises(MCPError) as own:
                await client.read_resource("nowhere://at-all")
            error = _error_of(own)
            assert error.code == types.INVALID_PARAMS
            assert error.data == {"uri": "nowhere://at-all"}
            # The owner's error travels unchanged, its data included.
            with pytest.raises(MCPError) as theirs:
                await client.read_resource("bare://items/7")
            error = _error_of(theirs)
            assert (error.code, error.message) == (types.INVALID_PARAMS, "Resource not found")
            assert error.data == {"uri": "bare://items/7", "hint": "bare"}
