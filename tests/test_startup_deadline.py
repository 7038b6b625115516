"""Start-up waits with two upstreams that never finish their handshake, plus healthy ones.

Real hub processes (stdio and HTTP), real stdio upstreams: ``broken_server``
(junk lines on stdout; well-formed answers with the wrong ids) and
``plain_server`` (a no-SDK server that is ready in tens of milliseconds). The
bounds asserted are the ones the hub promises: a call to a registered tool
never waits for other servers, a list waits only until the start-up deadline,
and after the deadline nothing waits at all.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import http_hub, http_session, sse_session, stdio_hub

pytestmark = pytest.mark.anyio

STARTUP_TIMEOUT = 3.0


def plain_block(name: str, marker: Path | None = None, *, extra: str = "") -> str:
    env = f"env = {{ PLAIN_MARKER = {toml_str(str(marker))} }}\n" if marker else ""
    return (f"[servers.{name}]\ncommand = {toml_str(PY)}\n"
            f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n{env}{extra}\n")


def broken_block(name: str, mode: str) -> str:
    # connect_timeout far beyond the test: their first attempt never ends while it runs.
    return (f"[servers.{name}]\ncommand = {toml_str(PY)}\n"
            f"args = [{toml_str(str(FIXTURES / 'broken_server.py'))}]\n"
            f"env = {{ BROKEN_MODE = {toml_str(mode)} }}\nconnect_timeout = 600\n\n")


def broken_config(tmp: Path, *healthy: str, hub: str = "") -> Path:
    body = broken_block("junk", "junk") + broken_block("wrongids", "wrong_ids")
    body += "".join(plain_block(name) for name in healthy)
    path = tmp / "servers.toml"
    path.write_text(f"[hub]\nstartup_timeout = {STARTUP_TIMEOUT}\n{hub}\n{body}")
    return path


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


async def _scenario_delay(up_at: float) -> None:
    """The scenario's "0.5 s after start" (a step of the scenario, not a synchronisation)."""
    await anyio.sleep(max(0.0, up_at + 0.5 - time.monotonic()))


async def test_stdio_healthy_call_list_and_late_list(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy")
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            await _scenario_delay(time.monotonic())
            started = time.monotonic()
            result = await call(session, "healthy_echo", {"text": "hi"})
            assert time.monotonic() - started < 1.0
            assert _text(result) == "hi" and not result.is_error

            started = time.monotonic()
            listed = await session.list_tools()
            # The list waited (at most) until the deadline, which is at most
            # startup_timeout after any request made once the hub was up.
            assert time.monotonic() - started <= STARTUP_TIMEOUT + 0.5
            names = {t.name for t in listed.tools}
            assert {"healthy_echo", "healthy_hang"} <= names
            assert not any(n.startswith(("junk_", "wrongids_")) for n in names)

            # After the deadline nothing waits, the broken servers still connecting or not.
            started = time.monotonic()
            again = await session.list_tools()
            assert time.monotonic() - started < 1.0
            assert {t.name for t in again.tools} == names


async def test_http_healthy_call_list_and_second_session(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy")
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path, probe="/healthz") as hub:
            up_at = time.monotonic()
            async with http_session(hub.mcp_url) as session:
                await _scenario_delay(up_at)
                started = time.monotonic()
                result = await call(session, "healthy_echo", {"text": "hi"})
                assert time.monotonic() - started < 1.0
                assert _text(result) == "hi"

                started = time.monotonic()
                listed = await session.list_tools()
                assert time.monotonic() - started <= STARTUP_TIMEOUT + 0.5
                assert "healthy_echo" in {t.name for t in listed.tools}

            async with sse_session(f"{hub.base}/sse") as sse:
                started = time.monotonic()
                result = await call(sse, "healthy_echo", {"text": "sse"})
                assert time.monotonic() - started < 1.0
                assert _text(result) == "sse"

            # A second session after the deadline lists at once.
            async with http_session(hub.mcp_url) as second:
                started = time.monotonic()
                listed = await second.list_tools()
                assert time.monotonic() - started < 1.0
                assert "healthy_echo" in {t.name for t in listed.tools}


async def test_bridge_tool_call_does_not_wait_for_broken_servers(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "healthy", hub="")
    text = config.read_text() + '\n[tool_search]\nmode = "on"\n'
    config.write_text(text)
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            await _scenario_delay(time.monotonic())
            started = time.monotonic()
            result = await call(session,
                "tool_call", {"name": "healthy_echo", "arguments": {"text": "bridged"}})
            assert time.monotonic() - started < 1.0
            assert _text(result) == "bridged"


async def test_unknown_name_waits_only_for_the_server_of_its_prefix(tmp_path: Path) -> None:
    """A name no server with a fitting prefix could provide fails at once."""
    config = broken_config(tmp_path, "healthy")
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            started = time.monotonic()
            with pytest.raises(MCPError, match="Unknown tool"):
                await call(session, "healthy_nosuchtool", {})
            assert time.monotonic() - started < 1.0


async def test_32_calls_end_within_a_second_of_the_upstream_crash(tmp_path: Path) -> None:
    config = broken_config(tmp_path, "victim")
    with anyio.fail_after(120):
        async with (
            http_hub(config, tmp_path, probe="/healthz") as hub,
            http_session(hub.mcp_url) as session,
            httpx2.AsyncClient() as http,
        ):
            ended: list[tuple[float, str]] = []

            async def hang() -> None:
                result = await call(session, "victim_hang", {})
                ended.append((time.monotonic(), _text(result)))

            async with anyio.create_task_group() as tg:
                for _ in range(32):
                    tg.start_soon(hang)
                while True:  # bounded by fail_after: until all 32 are at the upstream
                    status = json.loads((await http.get(f"{hub.base}/status.json")).text)
                    victim = next(u for u in status["upstreams"] if u["name"] == "victim")
                    if victim["in_flight"] == 32:
                        break
                    await anyio.sleep(0.05)
                crashed_at = time.monotonic()
                crash = await call(session, "victim_crash", {})
                assert crash.is_error
            assert len(ended) == 32
            for at, text in ended:
                assert at - crashed_at < 1.0
                assert "connection was lost" in text
