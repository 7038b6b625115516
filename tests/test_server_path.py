"""A server's own ``path``: the shipped config's bundled Node reaches the servers that
need it only, so a server a user adds finds the machine's own node, npx, python; a
child that never answers is reported with its stderr tail and the command to try."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

import anyio
import pytest

from mcp_hub.config import commands
from mcp_hub.config.model import load_config, parse_config
from mcp_hub.upstream import ServerState
from mcp_hub.upstream.stdio import prespawn
from mcp_hub.upstream.transports import child_environment
from tests.fixtures_upstream import is_state, running, toml_str
from tests.hubtest import ROOT

pytestmark = pytest.mark.anyio

USER_SERVER = ('\n[servers.memory]\ncommand = "npx"\n'
               'args = ["-y", "@modelcontextprotocol/server-memory"]\n')


def _stub(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_shipped_config_gives_the_bundled_node_to_everything_only(tmp_path: Path) -> None:
    # The shipped file as it is, in a folder of its own, with a server a user added.
    config_file = tmp_path / "servers.toml"
    config_file.write_text((ROOT / "servers.toml").read_text() + USER_SERVER)
    bundled = tmp_path / "js" / "node_modules" / ".bin"
    for name in ("node", "npx", "mcp-server-everything"):
        _stub(bundled / name)
    machine = tmp_path / "machine-bin"
    machine_node, machine_npx = _stub(machine / "node"), _stub(machine / "npx")
    environ = {"PATH": f"{machine}:/usr/bin:/bin"}

    config = load_config(config_file, environ=environ)
    user_path = child_environment(config.servers["memory"], environ)["PATH"]
    assert str(bundled) not in user_path.split(os.pathsep)
    assert commands.find_command("npx", user_path) == str(machine_npx)
    assert commands.find_command("node", user_path) == str(machine_node)
    # The hub's own bin folder is still searched, after the machine's PATH.
    assert user_path.split(os.pathsep)[-1] == commands.hub_bin_dir()

    shipped_path = child_environment(config.servers["everything"], environ)["PATH"]
    assert shipped_path.split(os.pathsep)[0] == str(bundled)
    assert commands.find_command("node", shipped_path) == str(bundled / "node")


def test_a_server_path_goes_first_for_that_server_only(tmp_path: Path) -> None:
    config = parse_config(
        '[hub]\npath = ["/opt/shared"]\n'
        '[servers.a]\ncommand = "a"\npath = ["./own", "~/tools"]\n'
        '[servers.b]\ncommand = "b"\n')
    base = {"PATH": "/usr/bin"}
    a_path = child_environment(config.servers["a"], base)["PATH"].split(os.pathsep)
    b_path = child_environment(config.servers["b"], base)["PATH"].split(os.pathsep)
    assert a_path[0].endswith(f"{os.sep}own") and os.path.isabs(a_path[0])
    assert a_path[1] == os.path.expanduser("~/tools")
    assert a_path[2:4] == ["/opt/shared", "/usr/bin"]
    assert b_path[:2] == ["/opt/shared", "/usr/bin"]


def test_the_early_start_uses_the_same_per_server_path(tmp_path: Path) -> None:
    own = tmp_path / "own"
    script = own / "probe-server"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nimport sys, time\ntime.sleep(30)\n")
    script.chmod(0o755)
    config_file = tmp_path / "servers.toml"
    config_file.write_text('[servers.p]\ncommand = "probe-server"\npath = ["./own"]\n')
    try:
        assert prespawn.start(config_file) == 1
        started = prespawn._handoff.started()["p"]
        config = load_config(config_file)
        assert started.env["PATH"] == child_environment(config.servers["p"])["PATH"]
        assert started.argv[0] == str(script)
    finally:
        prespawn.discard_all()


async def test_a_silent_child_is_reported_with_its_stderr_and_the_command_to_try() -> None:
    code = "import sys, time; print('fetching a package', file=sys.stderr, flush=True); time.sleep(60)"
    body = (f"[servers.quiet]\ncommand = {toml_str(sys.executable)}\n"
            f"args = ['-c', {toml_str(code)}]\nconnect_timeout = 1\n"
            "env = { TOKEN_FOR_QUIET = \"x\" }\n")
    with anyio.fail_after(60):
        async with running(body) as (manager, _):
            await manager.wait_until(is_state(manager, "quiet", ServerState.RECONNECTING))
            error = manager.statuses()[0].last_error or ""
    assert error.startswith("no answer within connect_timeout (1 s)"), error
    assert "stderr: fetching a package" in error
    hand = error.split("try it by hand: ", 1)[1]
    words = shlex.split(hand.split(" (with its env:")[0])
    assert words[0].startswith("PATH=")
    assert words[1:] == [sys.executable, "-c", code]
    assert hand.endswith("(with its env: TOKEN_FOR_QUIET)")


async def test_a_child_silent_on_stderr_too_says_so() -> None:
    body = (f"[servers.mute]\ncommand = {toml_str(sys.executable)}\n"
            "args = ['-c', 'import time; time.sleep(60)']\nconnect_timeout = 1\n")
    with anyio.fail_after(60):
        async with running(body) as (manager, _):
            await manager.wait_until(is_state(manager, "mute", ServerState.RECONNECTING))
            error = manager.statuses()[0].last_error or ""
    assert "it printed nothing on stderr; try it by hand: PATH=" in error, error
