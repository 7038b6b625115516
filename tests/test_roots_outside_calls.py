"""``roots/list`` asked by an upstream outside any call is answered by the hub.

Real hub processes over stdio; the upstream is ``plain_server`` with
``PLAIN_ASK_ROOTS`` (it asks at start-up and after every ``roots/list_changed``
and records each answer) or ``@modelcontextprotocol/server-everything``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import EVERYTHING, ROOT, hub_env, stdio_hub

pytestmark = pytest.mark.anyio

CLIENT_ROOT = "file:///srv/client-project"


async def client_roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri=CLIENT_ROOT, name="project")])  # type: ignore[arg-type]


def plain_config(tmp: Path, marker: Path, *, hub: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        f"[hub]\nstartup_timeout = 20\n{hub}\n"
        f"[servers.plain]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n"
        f"env = {{ PLAIN_MARKER = {toml_str(str(marker))}, PLAIN_ASK_ROOTS = \"1\" }}\n")
    return path


def answers(marker: Path) -> list[Any]:
    if not marker.exists():
        return []
    return [json.loads(line[6:]) for line in marker.read_text().splitlines()
            if line.startswith("roots ")]


async def wait_for(predicate: Any) -> None:
    while not predicate():  # bounded by the caller's fail_after
        await anyio.sleep(0.05)


async def test_client_roots_reach_an_upstream_that_asked_at_start_up(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    config = plain_config(tmp_path, marker)
    with anyio.fail_after(60):
        async with stdio_hub(config, list_roots_callback=client_roots):
            # The start-up question gets an answer, never an error; once the client's
            # roots are known the upstream is told, asks again, and gets them.
            await wait_for(lambda: any(
                isinstance(a, dict) and CLIENT_ROOT in json.dumps(a) for a in answers(marker)))
            assert all(isinstance(a, dict) and "roots" in a for a in answers(marker))
            assert "roots_changed" in marker.read_text()


async def test_configured_file_roots_when_no_client_has_roots(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    shared = tmp_path / "shared"
    shared.mkdir()
    config = plain_config(tmp_path, marker, hub=f"\n[builtins.file]\nroots = [{toml_str(str(shared))}]\n")
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:  # this client declares no roots
            await session.list_tools()
            await wait_for(lambda: bool(answers(marker)))
            first = answers(marker)[0]
            assert [r["uri"] for r in first["roots"]] == [shared.resolve().as_uri()]


async def test_empty_list_without_client_or_file_roots(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    config = plain_config(tmp_path, marker)
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            await session.list_tools()
            await wait_for(lambda: bool(answers(marker)))
            assert answers(marker)[0] == {"roots": []}


@asynccontextmanager
async def everything_behind_hub(tmp: Path) -> AsyncIterator[tuple[ClientSession, Path]]:
    config = tmp / "servers.toml"
    config.write_text(f'[hub]\nstartup_timeout = 30\n\n[servers.everything]\n'
                      f'command = "{EVERYTHING}"\nargs = ["stdio"]\nprefix = ""\n')
    log = tmp / "hub.log"
    params = StdioServerParameters(
        command=PY, args=["-m", "mcp_hub", "serve", "--config", str(config)],
        cwd=str(ROOT), env=hub_env())
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, list_roots_callback=client_roots) as session,
        ):
            await session.initialize()
            yield session, log


@pytest.mark.node
@pytest.mark.skipif(not EVERYTHING.exists() and not os.environ.get("CI"),
                    reason="Node packages not installed (make setup)")
async def test_server_everything_gets_roots_without_error(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with everything_behind_hub(tmp_path) as (session, log):
            names = {t.name for t in (await session.list_tools()).tools}
            assert "get-roots-list" in names
            while True:  # until the server's cached roots are the client's (bounded)
                result = await session.call_tool("get-roots-list", {})
                text = "".join(getattr(c, "text", "") for c in result.content)
                if CLIENT_ROOT in text:
                    break
                await anyio.sleep(0.1)
    text = log.read_text()
    assert "cannot relay roots/list" not in text
    assert "Failed to request roots" not in text


async def test_a_client_changing_its_roots_makes_upstreams_ask_again(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    config = plain_config(tmp_path, marker)
    current = [CLIENT_ROOT]

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=u) for u in current])  # type: ignore[misc]

    with anyio.fail_after(60):
        async with stdio_hub(config, list_roots_callback=roots) as session:
            await wait_for(lambda: any(CLIENT_ROOT in json.dumps(a) for a in answers(marker)))
            current[:] = ["file:///srv/other"]
            await session.send_notification(types.RootsListChangedNotification())
            await wait_for(lambda: any("file:///srv/other" in json.dumps(a)
                                       for a in answers(marker)))
            assert CLIENT_ROOT not in json.dumps(answers(marker)[-1])
