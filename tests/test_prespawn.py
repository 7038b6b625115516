"""Stdio upstreams started before the hub's own imports are used only when they match exactly."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from mcp_hub.upstream.stdio import prespawn
from tests.hubtest import ROOT, echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(autouse=True)
def _clean() -> object:
    yield
    prespawn.discard_all()


def test_only_plain_enabled_stdio_servers_are_started_early(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        echo_server_toml("plain")
        + echo_server_toml("interpolated", env={"TOKEN": "${SOME_TOKEN}"})
        + echo_server_toml("off", extra="enabled = false")
        + '[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\n'
        + '[servers.missing]\ncommand = "no-such-command-anywhere"\n',
    )
    assert prespawn.start(config) == 1
    started = prespawn._handoff.started()
    assert list(started) == ["plain"]
    assert started["plain"].cwd == str(ROOT)


async def test_a_matching_process_is_adopted_and_a_different_one_is_stopped(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("a") + echo_server_toml("b"))
    assert prespawn.start(config) == 2
    early = prespawn.claim()
    assert prespawn._handoff.started() == {} and set(early.started()) == {"a", "b"}
    a, b = early.started()["a"], early.started()["b"]
    with anyio.fail_after(20):
        adopted = await early.adopt("a", a.argv, a.env, a.cwd)
        assert adopted is not None and adopted.pid == a.popen.pid
        await adopted.stdin.send(
            b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        chunk = await adopted.stdout.__anext__()
        assert b'"id":1' in chunk.replace(b" ", b"")
        # Same server, other environment: not adopted, and the early process is stopped.
        assert await early.adopt("b", b.argv, {**b.env, "EXTRA": "1"}, b.cwd) is None
        while _alive(b.popen.pid):
            await anyio.sleep(0.02)
        await adopted.stdin.aclose()
        adopted.kill()
        await adopted.wait()


def test_discard_all_stops_what_nobody_adopted(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("left"))
    assert prespawn.start(config) == 1
    pid = prespawn._handoff.started()["left"].popen.pid
    prespawn.discard_all()
    assert not _alive(pid)
    assert prespawn._handoff.started() == {}


def _pids_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes() and _alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
async def test_an_adopted_upstream_killed_with_sigkill_is_noticed_and_replaced(tmp_path: Path) -> None:
    marker = f"EARLY{os.getpid()}x{id(tmp_path)}"
    config = write_config(tmp_path, echo_server_toml("echo", env={"HUB_TEST_MARK": marker}))
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path, "--log-level", "debug") as hub, \
                http_session(hub.mcp_url) as session:
            assert (await session.call_tool("echo_echo", {"text": "a"})).content[0].text == "a"  # type: ignore[union-attr]
            assert "started early" in hub.stderr()
            (pid,) = _pids_with(marker)
            os.kill(pid, signal.SIGKILL)
            while True:
                pids = _pids_with(marker)
                if pids and pids != [pid]:
                    break
                await anyio.sleep(0.05)
            while True:
                try:
                    result = await session.call_tool("echo_echo", {"text": "b"})
                except MCPError:  # its tools left with it; they come back on reconnect
                    result = None
                if result is not None and not result.is_error:
                    break
                await anyio.sleep(0.1)
            assert result.content[0].text == "b"  # type: ignore[union-attr]
