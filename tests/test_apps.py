"""MCP Apps (``io.modelcontextprotocol/ui``) through a real hub process.

Two upstreams built on the SDK's ``mcp.server.apps.Apps``
(:mod:`tests.fixtures_upstream.apps_server`): ``alpha`` over stdio, ``beta``
over Streamable HTTP, both serving the same ``ui://app.html``. Clients are the
SDK's ``Client`` in both eras (``legacy``: ``initialize``; ``auto``:
``server/discover``), to the hub over stdio and HTTP, the upstreams reached in
either era (``[servers.NAME] protocol``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.extension import advertise
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from tests.erastest import asking_over_http, hub_client, text_of
from tests.hubtest import PY, ROOT, http_hub, hub_env, write_config

pytestmark = pytest.mark.anyio

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
APPS = ["-m", "tests.fixtures_upstream.apps_server"]
TINY = f'[servers.tiny]\ncommand = "{PY}"\nargs = ["-m", "tests.fixtures_upstream.tiny_server"]\ncwd = "{ROOT}"\n'


def apps_client_options() -> dict[str, Any]:
    """A host that renders MCP Apps: it declares the extension with the app MIME type."""
    return {"extensions": [advertise(UI, {"mimeTypes": [MIME]})]}


def _stdio_block(label: str, protocol: str) -> str:
    args = [*APPS, "--label", label]
    return (f"[servers.{label}]\ncommand = \"{PY}\"\n"
            f"args = {args!r}\n".replace("'", '"') + f'cwd = "{ROOT}"\nprotocol = "{protocol}"\n')


@asynccontextmanager
async def apps_config(tmp: Path, protocol: str, extra: str = "") -> AsyncIterator[Path]:
    """``alpha`` (stdio) and ``beta`` (HTTP) Apps upstreams, spoken to in ``protocol``."""
    async with asking_over_http([*APPS, "--label", "beta"], name="beta",
                                extra=f'protocol = "{protocol}"\n') as beta:
        yield write_config(tmp, _stdio_block("alpha", protocol) + beta + TINY + extra)


def _wire(caps: Any) -> dict[str, Any]:
    wire: dict[str, Any] = caps.model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire


async def _capabilities(client: Client) -> dict[str, Any]:
    await client.list_tools()
    if client.protocol_version == "2026-07-28":
        return _wire((await client.session.discover()).capabilities)
    return _wire(client.server_capabilities)


async def _direct_capabilities(mode: str) -> dict[str, Any]:
    params = StdioServerParameters(command=PY, args=[*APPS, "--label", "alpha"], cwd=str(ROOT),
                                   env=hub_env())
    async with Client(params, mode=mode) as client:
        return await _capabilities(client)


@pytest.mark.parametrize("upstream", ["2025", "auto"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_hub_advertises_the_upstreams_extensions_per_profile(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    # A 2026-07-28 client is told of the extension; initialize (2025) has no field for it.
    direct = await _direct_capabilities(mode)
    assert direct.get("extensions") == ({UI: {}} if mode == "auto" else None)
    profile = '[profiles.plain]\ntoolsets = ["mcp-tiny"]\n'
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream, profile) as config:
            async with hub_client(transport, mode, config, tmp_path) as client:
                caps = await _capabilities(client)
            assert caps.get("extensions") == direct.get("extensions")
            if transport == "http":  # a profile without Apps servers advertises none
                async with http_hub(config, tmp_path) as hub, \
                        Client(f"{hub.base}/p/plain/mcp", mode=mode) as plain:
                    assert "extensions" not in await _capabilities(plain)


@pytest.mark.parametrize("upstream", ["2025", "auto"])
@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_upstream_hears_the_apps_support_of_the_calling_client(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream) as config:
            async with hub_client(transport, mode, config, tmp_path,
                                  **apps_client_options()) as host:
                for server in ("alpha", "beta"):
                    result = await host.call_tool(f"{server}_show_dashboard", {})
                    assert text_of(result) == f"ui:{server}"
            async with hub_client(transport, mode, config, tmp_path) as plain:
                result = await plain.call_tool("alpha_show_dashboard", {})
                # A 2026-07-28 upstream hears each call's client; a 2025 session keeps the
                # hub's own declaration (docs/protocol.md, "Extensions").
                assert text_of(result) == ("text:alpha" if upstream == "auto" else "ui:alpha")


#: (hub transport, client era, upstream era): each axis in both values, in four runs.
COMBOS = [("stdio", "legacy", "2025"), ("stdio", "auto", "auto"),
          ("http", "legacy", "auto"), ("http", "auto", "2025")]


@pytest.mark.parametrize(("transport", "mode", "upstream"), COMBOS)
async def test_app_resources_are_namespaced_per_server(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream) as config, \
                hub_client(transport, mode, config, tmp_path, **apps_client_options()) as host:
            listed = (await host.list_resources()).resources
            apps = {str(r.uri): r for r in listed if str(r.uri).startswith("ui://")}
            assert set(apps) == {"ui://alpha/app.html", "ui://beta/app.html"}
            assert {r.mime_type for r in apps.values()} == {MIME}
            tools = {t.name: t for t in (await host.list_tools()).tools}
            for server in ("alpha", "beta"):
                for tool in ("show_dashboard", "refresh_data"):
                    meta = tools[f"{server}_{tool}"].meta or {}
                    assert meta["ui"]["resourceUri"] == f"ui://{server}/app.html"
                read = await host.read_resource(f"ui://{server}/app.html")
                assert f"<title>{server}</title>" in text_of(read)
                assert [str(c.uri) for c in read.contents] == [f"ui://{server}/app.html"]
                assert read.contents[0].mime_type == MIME
            with pytest.raises(Exception, match=r"not found|Unknown resource"):
                await host.read_resource("ui://app.html")


@pytest.mark.parametrize(("transport", "mode", "upstream"), COMBOS)
async def test_an_apps_own_tool_names_reach_its_server(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream) as config, \
                hub_client(transport, mode, config, tmp_path, **apps_client_options()) as host:
            # A name only one app server has goes there, rendered or not.
            assert text_of(await host.call_tool("plain_beta", {})) == "plain:beta"
            sessionless = transport == "http" and mode == "auto"
            for server in ("alpha", "beta", "alpha"):
                await host.read_resource(f"ui://{server}/app.html")
                if sessionless:  # no session to remember the rendered app by
                    with pytest.raises(MCPError, match="alpha_refresh_data, beta_refresh_data"):
                        await host.call_tool("refresh_data", {})
                    continue
                result = await host.call_tool("refresh_data", {})
                assert text_of(result) == f"refresh:{server}"
            with pytest.raises(MCPError, match="Unknown tool: no_such_tool"):
                await host.call_tool("no_such_tool", {})


def _json(result: types.CallToolResult) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text_of(result))
    return data


@pytest.mark.parametrize(("transport", "mode", "upstream"), COMBOS[1:3])
async def test_with_bridging_the_host_keeps_ui_tools_and_the_model_never_finds_app_only_ones(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream, '[tool_search]\nmode = "on"\n') as config, \
                hub_client(transport, mode, config, tmp_path, **apps_client_options()) as host:
            tools = {t.name: t for t in (await host.list_tools()).tools}
            assert {"tool_search", "tool_describe", "tool_call"} <= set(tools)
            assert "alpha_plain_alpha" not in tools  # deferred behind the bridge
            for server in ("alpha", "beta"):
                for tool, visibility in (("show_dashboard", ["model", "app"]),
                                         ("refresh_data", ["app"])):
                    ui = (tools[f"{server}_{tool}"].meta or {})["ui"]
                    assert ui == {"resourceUri": f"ui://{server}/app.html",
                                  "visibility": visibility}
            found = _json(await host.call_tool("tool_search", {
                "queries": ["refresh the dashboard data", "plain tool of alpha"]}))
            names = {m["name"] for r in found["results"] for m in r["matches"]}
            assert "alpha_plain_alpha" in names
            assert not {n for n in names if n.endswith("refresh_data")}
            described = _json(await host.call_tool("tool_describe",
                                                   {"names": ["alpha_refresh_data"]}))
            assert described["tools"] == []
            refused = await host.call_tool("tool_call", {"name": "alpha_refresh_data"})
            assert refused.is_error and "app only" in text_of(refused)
            # The host calls it directly, as its app asks.
            assert text_of(await host.call_tool("alpha_refresh_data", {})) == "refresh:alpha"
