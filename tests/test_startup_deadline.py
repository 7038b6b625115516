"""Start-up waits with two upstreams that never finish their handshake, plus healthy ones.

Real hub processes (stdio and HTTP), real stdio upstreams: ``broken_server``
(junk lines on stdout; well-formed answers with the wrong ids) and
``plain_server`` (a no-SDK server that is ready in tens of milliseconds). What
the hub promises, shown by events rather than by durations:

- a call to a registered tool never waits for other servers: with a start-up
  deadline of 600 s and servers that never connect, a call that waited for them
  would hit the test's bound;
- a list waits until the deadline, and no further: its answer arrives after the
  hub logged that the deadline cut its wait short (naming the servers still
  connecting), and within the test's bound while those servers go on for 600 s;
- after the deadline nothing waits: a later list logs no second such line.

Over stdio the hub's first answer waits like a list (its instructions and
capabilities describe the upstreams as they are then), so a stdio client's calls
always come after the deadline; the "never waits" cases are shown over HTTP and SSE.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import ROOT, http_hub, http_session, hub_env, sse_session

pytestmark = pytest.mark.anyio

#: The deadline of the tests that watch a list reach it.
STARTUP_TIMEOUT = 5.0
#: A deadline no test reaches: a request that waits for it fails at the test's bound.
NEVER = 600.0
#: How the hub's line about a wait the deadline cut short begins.
CUT_SHORT = "start-up deadline reached"


def plain_block(name: str, marker: Path | None = None, *, extra: str = "") -> str:
    env = f"env = {{ PLAIN_MARKER = {toml_str(str(marker))} }}\n" if marker else ""
    return (f"[servers.{name}]\ncommand = {toml_str(PY)}\n"
            f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n{env}{extra}\n")


def broken_block(name: str, mode: str) -> str:
    # connect_timeout far beyond the test: their first attempt never ends while it runs.
    return (f"[servers.{name}]\ncommand = {toml_str(PY)}\n"
            f"args = [{toml_str(str(FIXTURES / 'broken_server.py'))}]\n"
            f"env = {{ BROKEN_MODE = {toml_str(mode)} }}\nconnect_timeout = 600\n\n")


def broken_config(tmp: Path, *healthy: str, hub: str = "", startup: float = NEVER,
                  extra: str = "") -> Path:
    body = broken_block("junk", "junk") + broken_block("wrongids", "wrong_ids")
    body += "".join(plain_block(name, extra=extra) for name in healthy)
    path = tmp / "servers.toml"
    path.write_text(f"[hub]\nstartup_timeout = {startup}\n{hub}\n{body}")
    return path


@asynccontextmanager
async def stdio_hub(config: Path, log: Path) -> AsyncIterator[ClientSession]:
    """The hub as a stdio subprocess (its stderr in ``log``), with an initialised session."""
    params = StdioServerParameters(
        command=PY, args=["-m", "mcp_hub", "serve", "--config", str(config)],
        cwd=str(ROOT), env=hub_env())
    with log.open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def cut_short(log: Path) -> list[str]:
    """The hub's lines about a wait the start-up deadline cut short."""
    return [line for line in log.read_text(errors="replace").splitlines() if CUT_SHORT in line]


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return "".join(getattr(c, "text", "") for c in content)


async def call(session: ClientSession, name: str, arguments: dict[str, Any]
               ) -> types.CallToolResult:
    """``tools/call`` alone: the SDK client's ``call_tool`` also lists the tools (to
    validate structured output), and that list is not what is measured here."""
    return await session.send_request(
        types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments)),
        types.CallToolResult)


async def test_stdio_waits_once_until_the_deadline_and_never_again(tmp_path: Path) -> None:
    """Over stdio the first answer (its instructions and capabilities name the upstreams as
    they are) waits like a list: until the deadline, and after it nothing waits."""
    config = broken_config(tmp_path, "healthy", startup=STARTUP_TIMEOUT)
    log = tmp_path / "hub.log"
    with anyio.fail_after(60):  # the broken servers' first attempts last 600 s
        async with stdio_hub(config, log) as session:
            listed = await session.list_tools()
            # The answers came after the deadline ended the wait (logged before them).
            [line] = cut_short(log)
            assert "junk, wrongids" in line and "healthy" not in line
            names = {t.name for t in listed.tools}
            assert {"healthy_echo", "healthy_hang"} <= names
            assert not any(n.startswith(("junk_", "wrongids_")) for n in names)

            # After the deadline nothing waits, the broken servers still connecting or not.
            again = await session.list_tools()
            assert {t.name for t in again.tools} == names
            result = await call(session, "healthy_echo", {"text": "after"})
            assert _text(result) == "after"
            assert len(cut_short(log)) == 1


async def test_http_and_sse_calls_never_wait_for_broken_servers(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy")
    with anyio.fail_after(90):  # the deadline is 600 s away
        async with http_hub(config, tmp_path, probe="/healthz") as hub:
            async with http_session(hub.mcp_url) as session:
                result = await call(session, "healthy_echo", {"text": "hi"})
                assert _text(result) == "hi"
            async with sse_session(f"{hub.base}/sse") as sse:
                result = await call(sse, "healthy_echo", {"text": "sse"})
                assert _text(result) == "sse"
            assert CUT_SHORT not in hub.stderr()


async def test_http_list_waits_until_the_deadline_and_a_second_session_does_not(
        tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy", startup=STARTUP_TIMEOUT)
    with anyio.fail_after(90):  # the broken servers' first attempts last 600 s
        async with http_hub(config, tmp_path, probe="/healthz") as hub:
            async with http_session(hub.mcp_url) as session:
                listed = await session.list_tools()
                assert "healthy_echo" in {t.name for t in listed.tools}
                assert hub.stderr().count(CUT_SHORT) == 1  # logged before the answer

            # A second session after the deadline lists at once: no wait, no second line
            # (prompts were never listed: their list is prepared now, not taken from a cache).
            async with http_session(hub.mcp_url) as second:
                listed = await second.list_tools()
                assert "healthy_echo" in {t.name for t in listed.tools}
                await second.list_prompts()
            assert hub.stderr().count(CUT_SHORT) == 1


async def test_bridge_tool_call_does_not_wait_for_broken_servers(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy")
    config.write_text(config.read_text() + '\n[tool_search]\nmode = "on"\n')
    with anyio.fail_after(90):  # the deadline is 600 s away
        async with http_hub(config, tmp_path, probe="/healthz") as hub, \
                http_session(hub.mcp_url) as session:
            result = await call(session,
                "tool_call", {"name": "healthy_echo", "arguments": {"text": "bridged"}})
            assert _text(result) == "bridged"


async def test_unknown_name_waits_only_for_the_server_of_its_prefix(tmp_path: Path) -> None:
    """A name no server with a fitting prefix could provide fails without the deadline."""
    config = broken_config(tmp_path, "healthy")
    with anyio.fail_after(90):  # the deadline is 600 s away
        async with http_hub(config, tmp_path, probe="/healthz") as hub, \
                http_session(hub.mcp_url) as session:
            with pytest.raises(MCPError, match="Unknown tool"):
                await call(session, "healthy_nosuchtool", {})


async def test_32_calls_end_when_their_upstream_crashes(tmp_path: Path) -> None:
    """The hanging calls would wait 600 s for their timeout: the crash alone ends them."""
    config = broken_config(tmp_path, "victim", extra="timeout = 600\n")
    with anyio.fail_after(120):
        async with (
            http_hub(config, tmp_path, probe="/healthz") as hub,
            http_session(hub.mcp_url) as session,
            httpx2.AsyncClient() as http,
        ):
            ended: list[str] = []

            async def hang() -> None:
                result = await call(session, "victim_hang", {})
                ended.append(_text(result))

            async with anyio.create_task_group() as tg:
                for _ in range(32):
                    tg.start_soon(hang)
                while True:  # bounded by fail_after: until all 32 are at the upstream
                    status = json.loads((await http.get(f"{hub.base}/status.json")).text)
                    victim = next(u for u in status["upstreams"] if u["name"] == "victim")
                    if victim["in_flight"] == 32:
                        break
                    await anyio.sleep(0.05)
                assert ended == []  # every one ends after the crash, none before
                crash = await call(session, "victim_crash", {})
                assert crash.is_error
            assert len(ended) == 32
            for text in ended:
                assert "connection was lost" in text
