"""Tools a server does not list, called by name through the hub.

A server may answer calls of names it does not list (hooks that change its
lists, tools it announces elsewhere, or simply its own "unknown tool" answer).
The one server exposed without a prefix gets such a call as it is, so a client
sees what it would see talking to that server directly; a server's
``include``/``exclude``, its tool rules and the caller's access rules still
decide what is reachable, and with a prefix or a second unprefixed server the
name is the hub's "Unknown tool".
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.erastest import asking_toml
from tests.hubtest import PY, ROOT, stdio_hub, write_config

pytestmark = pytest.mark.anyio


def _tiny(name: str, extra: str = "") -> str:
    """The tiny fixture: it lists ``echo`` and answers a call of any name with ``text``."""
    return (f'[servers.{name}]\ncommand = "{PY}"\n'
            f'args = ["-m", "tests.fixtures_upstream.tiny_server"]\ncwd = "{ROOT}"\n{extra}')


def _text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def _call(config: Path, name: str, *args: str) -> types.CallToolResult | MCPError:
    with anyio.fail_after(60):
        async with stdio_hub(config, *args) as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            assert name not in listed
            try:
                return await session.call_tool(name, {"text": "hi"})
            except MCPError as exc:
                return exc


async def test_an_unlisted_name_reaches_the_one_server_without_a_prefix(tmp_path: Path) -> None:
    answer = await _call(write_config(tmp_path, _tiny("tiny", 'prefix = ""\n')), "hidden")
    assert isinstance(answer, types.CallToolResult)
    assert (_text(answer), answer.is_error) == ("hi", False)


@pytest.mark.parametrize("body", [
    _tiny("tiny", 'prefix = ""\nexclude = ["hid*"]\n'),      # the server's own filter
    _tiny("tiny", 'prefix = ""\ninclude = ["echo"]\n'),
    _tiny("tiny") + _tiny("other"),                          # prefixed servers only
    _tiny("tiny", 'prefix = ""\n') + _tiny("other", 'prefix = ""\n'),  # whose would it be?
], ids=["excluded", "not-included", "prefixed", "ambiguous"])
async def test_an_unlisted_name_stays_unknown_where_the_owner_is_not_clear_or_filtered(
    tmp_path: Path, body: str,
) -> None:
    answer = await _call(write_config(tmp_path, body), "hidden")
    assert isinstance(answer, MCPError)
    assert answer.error.message.startswith("Unknown tool: hidden")


async def test_a_profile_reaches_no_unlisted_name(tmp_path: Path) -> None:
    """A profile's tools are the names it lists: a name nobody lists is not one of them."""
    body = _tiny("tiny", 'prefix = ""\n') + '\n[profiles.narrow]\ntoolsets = ["mcp-tiny"]\n'
    config = write_config(tmp_path, body)
    assert isinstance(await _call(config, "hidden"), types.CallToolResult)
    answer = await _call(config, "hidden", "--profile", "narrow")
    assert isinstance(answer, MCPError)
    assert answer.error.message.startswith("Unknown tool: hidden")


async def test_the_servers_own_error_for_an_unlisted_name_reaches_the_client_as_sent(
    tmp_path: Path,
) -> None:
    """A server that answers an unlisted name with a JSON-RPC error: the client gets that
    error, not a tool result made of it (what a 2026-07-28 client reads as complete)."""
    answer = await _call(write_config(tmp_path, asking_toml() + 'prefix = ""\n'), "hidden")
    assert isinstance(answer, MCPError)
    assert answer.error.code == types.INVALID_PARAMS


async def test_the_servers_unknown_tool_result_gains_the_hubs_suggestion(tmp_path: Path) -> None:
    """An ``isError`` "Unknown tool" result keeps the server's text and gains the hub's
    "Did you mean"; a name the server does serve is answered as the server answered it,
    though the hub would have a suggestion for it too."""
    serving = 'prefix = ""\nenv = { TINY_SERVES = "echo2" }\n'
    config = write_config(tmp_path, _tiny("tiny", serving))
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            unknown = await session.call_tool("ech", {"text": "hi"})
            served = await session.call_tool("echo2", {"text": "hi"})
    texts = [b.text for b in unknown.content if isinstance(b, types.TextContent)]
    assert unknown.is_error
    assert texts[0] == "Unknown tool: ech"
    assert len(texts) == 2 and texts[1].startswith("Did you mean: echo")
    assert (served.is_error, served.content) == (False, [types.TextContent(text="hi")])


async def test_the_servers_unknown_tool_error_gains_the_hubs_suggestion(tmp_path: Path) -> None:
    """A JSON-RPC "Unknown tool" error keeps its code and message, with the hub's
    "Did you mean" after it."""
    answer = await _call(write_config(tmp_path, asking_toml() + 'prefix = ""\n'), "sampl")
    assert isinstance(answer, MCPError)
    assert answer.error.code == types.INVALID_PARAMS
    assert answer.error.message.startswith("Unknown tool: sampl Did you mean: sample")
