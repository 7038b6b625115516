"""A narrow profile reaches nothing outside it, on every transport, bridge on and off.

The hub runs two echo upstreams, ``a`` and ``b`` (distinct resource schemes), the
file tools over a root holding ``secret.txt``, and a profile ``narrow`` exposing
only ``mcp-a``. Through ``/p/narrow/mcp``, ``/p/narrow/sse`` and
``serve --profile narrow`` over stdio, a client must not be able to search,
describe, call, list, read, get, subscribe or complete anything of ``b`` or of
the builtins, and every refusal must read exactly like the answer for a name
that does not exist.
"""

from __future__ import annotations

import difflib
import json
import warnings
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.fixtures.echo_server import BASE_TOOLS
from tests.hubtest import PY, ROOT, http_hub, http_session, sse_session, stdio_hub, write_config

pytestmark = pytest.mark.anyio

#: Every tool the narrow profile may reach: server a's tools.
VISIBLE = sorted(f"a_{t.name}" for t in BASE_TOOLS)
HIDDEN_TOOLS = ["b_echo", "b_add", "read_file", "search_files", "write_file", "hub_status", "clarify"]


def _server(name: str) -> str:
    return (
        f"[servers.{name}]\ncommand = {json.dumps(PY)}\n"
        'args = ["-m", "tests.fixtures.echo_server"]\n'
        f'cwd = "{ROOT}"\nenv = {{ ECHO_RESOURCE_SCHEME = "{name}" }}\n'
    )


def isolation_config(tmp: Path, mode: str) -> Path:
    files = tmp / "files"
    files.mkdir(exist_ok=True)
    (files / "secret.txt").write_text("the secret\n")
    body = (
        _server("a") + _server("b")
        + f'\n[builtins.file]\nroots = ["{files}"]\n'
        + f'\n[tool_search]\nmode = "{mode}"\n'
        + '\n[profiles.narrow]\ntoolsets = ["mcp-a"]\n'
    )
    return write_config(tmp, body)


def unknown_tool_text(name: str) -> str:
    """What a name that does not exist gets, when only VISIBLE exists."""
    text = f"Unknown tool: {name}"
    close = difflib.get_close_matches(name, VISIBLE, n=3)
    if close:
        text += f" Did you mean: {', '.join(close)}?"
    return text


async def _error_of(call: Callable[[], Any]) -> str:
    with pytest.raises(MCPError) as info:
        await call()
    return info.value.error.message


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def check_tools(session: ClientSession, bridge: bool) -> None:
    listed = {t.name for t in (await session.list_tools()).tools}
    assert not listed & set(HIDDEN_TOOLS), listed
    assert not any(n.startswith("b_") for n in listed), listed
    if bridge:
        assert {"tool_search", "tool_describe", "tool_call"} <= listed
    else:
        assert listed == set(VISIBLE)
    ok = await session.call_tool("a_echo", {"text": "hi"})
    assert _text(ok) == "hi"
    for name in HIDDEN_TOOLS:
        args = {"text": "x", "path": "secret.txt"}
        direct = await _error_of(partial(session.call_tool, name, args))
        assert direct == unknown_tool_text(name), direct
        if bridge:
            via = await _error_of(partial(session.call_tool, "tool_call", {"name": name, "arguments": args}))
            assert via == unknown_tool_text(name), via
    if bridge:
        await check_bridge(session)


async def check_bridge(session: ClientSession) -> None:
    ok = await session.call_tool("tool_call", {"name": "a_echo", "arguments": {"text": "yo"}})
    assert _text(ok) == "yo"
    for query in ("echo", "read file", "hub status", "b", "secret"):
        found = json.loads(_text(await session.call_tool("tool_search", {"query": query, "limit": 25})))
        for entry in found["results"]:
            for match in entry["matches"]:
                assert match["name"] in VISIBLE, match
            for source in entry.get("sources", []):
                assert source["server"] == "a", source
    described = json.loads(_text(await session.call_tool(
        "tool_describe", {"names": [*HIDDEN_TOOLS, "a_echo"]})))
    assert [t["name"] for t in described["tools"]] == ["a_echo"]
    assert {nf["name"] for nf in described["not_found"]} == set(HIDDEN_TOOLS)
    for nf in described["not_found"]:
        assert set(nf["close"]) <= set(VISIBLE), nf


async def check_prompts_and_resources(session: ClientSession) -> None:
    prompts = [p.name for p in (await session.list_prompts()).prompts]
    assert prompts == ["a_greet"]
    got = await session.get_prompt("a_greet", {"name": "x"})
    assert got.messages
    hidden = await _error_of(lambda: session.get_prompt("b_greet", {"name": "x"}))
    missing = await _error_of(lambda: session.get_prompt("c_greet", {"name": "x"}))
    assert (hidden, missing) == ("Unknown prompt: b_greet", "Unknown prompt: c_greet")

    resources = [str(r.uri) for r in (await session.list_resources()).resources]
    assert resources == ["a://hello"]
    templates = [t.uri_template for t in (await session.list_resource_templates()).resource_templates]
    assert templates == ["a://item/{id}"]
    assert (await session.read_resource("a://hello")).contents
    for uri in ("b://hello", "b://item/7"):
        hidden = await _error_of(partial(session.read_resource, uri))
        assert hidden == f"Unknown resource: {uri}"
    assert await _error_of(lambda: session.read_resource("c://hello")) == "Unknown resource: c://hello"
    with warnings.catch_warnings():  # removed as of 2026-07-28; handshake clients still use it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await session.subscribe_resource("a://hello")
        hidden = await _error_of(lambda: session.subscribe_resource("b://hello"))
        missing = await _error_of(lambda: session.subscribe_resource("c://hello"))
    assert (hidden, missing) == ("Unknown resource: b://hello", "Unknown resource: c://hello")

    arg = {"name": "name", "value": "x"}
    await session.complete(types.PromptReference(name="a_greet"), arg)
    hidden = await _error_of(lambda: session.complete(types.PromptReference(name="b_greet"), arg))
    missing = await _error_of(lambda: session.complete(types.PromptReference(name="c_greet"), arg))
    assert (hidden, missing) == ("Unknown prompt: b_greet", "Unknown prompt: c_greet")
    arg = {"name": "id", "value": "1"}
    hidden = await _error_of(lambda: session.complete(
        types.ResourceTemplateReference(uri="b://item/{id}"), arg))
    missing = await _error_of(lambda: session.complete(
        types.ResourceTemplateReference(uri="c://item/{id}"), arg))
    assert (hidden, missing) == ("Unknown resource: b://item/{id}", "Unknown resource: c://item/{id}")


async def check_narrow(session: ClientSession, bridge: bool) -> None:
    await check_tools(session, bridge)
    await check_prompts_and_resources(session)


@pytest.mark.parametrize("mode", ["on", "off"])
async def test_http_and_sse_profile_isolation(tmp_path: Path, mode: str) -> None:
    config = isolation_config(tmp_path, mode)
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub:
            # The unrestricted endpoint does reach b: the hidden names exist.
            async with http_session(hub.mcp_url) as full:
                names = {t.name for t in (await full.list_tools()).tools}
                if mode == "off":
                    assert {"b_echo", "read_file", "hub_status"} <= names
                assert "b_greet" in [p.name for p in (await full.list_prompts()).prompts]
                assert (await full.read_resource("b://hello")).contents
            sessions: list[Callable[[], AbstractAsyncContextManager[ClientSession]]] = [
                lambda: http_session(f"{hub.base}/p/narrow/mcp"),
                lambda: sse_session(f"{hub.base}/p/narrow/sse"),
            ]
            for open_session in sessions:
                async with open_session() as session:
                    await check_narrow(session, mode == "on")


@pytest.mark.parametrize("mode", ["on", "off"])
async def test_stdio_profile_isolation(tmp_path: Path, mode: str) -> None:
    config = isolation_config(tmp_path, mode)
    with anyio.fail_after(90):
        async with stdio_hub(config, "--profile", "narrow") as session:
            await check_narrow(session, mode == "on")

