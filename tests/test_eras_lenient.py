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
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.erastest import hub_client, text_of
from tests.hubtest import PY, ROOT, http_hub, write_config

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


def _modern_call(name: str, capabilities: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a 2026-07-28 ``tools/call`` declaring ``capabilities``."""
    headers = {"Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
               "Mcp-Name": name}
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": capabilities}
    return headers, {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                     "params": {"name": name, "arguments": {}, "_meta": meta}}


@pytest.mark.parametrize("protocol", ["2026", "auto"])
async def test_the_upstream_sees_only_what_the_client_declared(
    tmp_path: Path, protocol: str,
) -> None:
    # The hub can relay sampling, but a client that did not declare it cannot answer:
    # the upstream hears the client's capabilities and refuses (-32021), and the
    # client gets that error with HTTP 400; a client that declared sampling is served.
    config = write_config(tmp_path, bare_toml(protocol))
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as http:
            headers, body = _modern_call("bare_needs_sampling", {})
            refused = await http.post(hub.mcp_url, headers=headers, json=body)
            assert refused.status_code == 400, refused.text
            error = refused.json()["error"]
            assert error["code"] == -32021
            assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
            headers, body = _modern_call("bare_needs_sampling", {"sampling": {}})
            served = await http.post(hub.mcp_url, headers=headers, json=body)
            assert served.status_code == 200, served.text
            text = served.text
            assert "sampling declared" in text and "error" not in text
    # A 2025 client that declared no sampling: the same JSON-RPC error.
    async with hub_client("stdio", "legacy", config, tmp_path,
                          sampling_callback=None) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("bare_needs_sampling", {})
        assert raised.value.error.code == -32021
