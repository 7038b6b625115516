"""No stdio upstream outlives the hub, even when the hub is killed with ``kill -9``.

The hub runs as a real process over stdio with four stdio upstreams: two started
early (plain config values, :mod:`mcp_hub.upstream.stdio.prespawn`) and two started by the
transport (their ``env`` uses ``${…}``, which the early start leaves alone),
healthy and never-handshaking alike. Each upstream writes its pid to a file, and
none of them exits when its input ends (``STAY_AFTER_EOF``): once the hub is gone,
only the parent-death signal can end them, so an upstream it misses is still
running when the test's bound runs out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import ROOT, hub_env

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signal is Linux-only"),
]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _pids(*files: Path) -> list[int]:
    out: list[int] = []
    for f in files:
        if f.exists():
            out += [int(line) for line in f.read_text().split()]
    return out


def _config(tmp: Path) -> Path:
    script = toml_str(str(FIXTURES / "plain_server.py"))
    broken = toml_str(str(FIXTURES / "broken_server.py"))
    pid_plain, pid_broken = toml_str(str(tmp / "plain.pids")), toml_str(str(tmp / "broken.pids"))
    body = f"""
[hub]
startup_timeout = 2

[servers.early]
command = {toml_str(PY)}
args = [{script}]
env = {{ PLAIN_PID_FILE = {pid_plain}, STAY_AFTER_EOF = "1" }}

[servers.late]
command = {toml_str(PY)}
args = [{script}]
env = {{ PLAIN_PID_FILE = "${{ORPHAN_PLAIN_PIDS}}", STAY_AFTER_EOF = "1" }}

[servers.earlybroken]
command = {toml_str(PY)}
args = [{broken}]
env = {{ BROKEN_PID_FILE = {pid_broken}, STAY_AFTER_EOF = "1" }}
connect_timeout = 600

[servers.latebroken]
command = {toml_str(PY)}
args = [{broken}]
env = {{ BROKEN_PID_FILE = "${{ORPHAN_BROKEN_PIDS}}", BROKEN_MODE = "wrong_ids", STAY_AFTER_EOF = "1" }}
connect_timeout = 600
"""
    path = tmp / "servers.toml"
    path.write_text(body)
    return path


async def test_kill_9_of_the_hub_leaves_no_stdio_upstream(tmp_path: Path) -> None:
    config = _config(tmp_path)
    env = hub_env()
    env["ORPHAN_PLAIN_PIDS"] = str(tmp_path / "plain.pids")
    env["ORPHAN_BROKEN_PIDS"] = str(tmp_path / "broken.pids")
    files = (tmp_path / "plain.pids", tmp_path / "broken.pids")
    hub = subprocess.Popen(
        [PY, "-m", "mcp_hub", "serve", "--config", str(config)], cwd=str(ROOT), env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=(tmp_path / "hub.err").open("wb"),
    )
    try:
        with anyio.fail_after(60):
            while len([p for p in _pids(*files) if _alive(p)]) < 4:  # all four running
                assert hub.poll() is None, "the hub exited early"
                await anyio.sleep(0.05)
        children = [p for p in _pids(*files) if _alive(p)]
        hub.send_signal(signal.SIGKILL)
        await anyio.to_thread.run_sync(hub.wait)
        with anyio.fail_after(30):  # they never end by themselves (STAY_AFTER_EOF)
            while any(_alive(p) for p in children):
                await anyio.sleep(0.02)
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()
        for pid in _pids(*files):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
