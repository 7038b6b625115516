"""A failing ``mcp-hub`` command prints one line with the fix; ``--debug`` adds the traceback."""

from __future__ import annotations

import io
import socket
import subprocess
from pathlib import Path

from mcp_hub.cli.errors import report
from mcp_hub.errors import ConfigError
from tests.hubtest import PY, ROOT, hub_env


def _mcp_hub(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "mcp_hub", *args], cwd=str(ROOT), env=hub_env(),
                          capture_output=True, text=True, timeout=120)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_calling_an_unknown_tool_says_so_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text("[hub]\n")
    done = _mcp_hub("call", "nope", "--config", str(config))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr + done.stdout
    assert "ExceptionGroup" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "mcp-hub: Unknown tool: nope; `mcp-hub tools` lists the tool names")


def test_debug_adds_the_traceback(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text("[hub]\n")
    done = _mcp_hub("call", "nope", "--config", str(config), "--debug")
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("mcp-hub: Unknown tool: nope")


def test_a_hub_that_is_not_there_is_one_line_naming_the_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    done = _mcp_hub("status", "--url", url)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "cannot reach" in line]
    assert len(errors) == 1, done.stderr
    assert errors[0].startswith(f"mcp-hub: cannot reach the hub at {url}"), done.stderr


def test_an_unexpected_error_inside_task_groups_is_one_line_with_the_way_to_more() -> None:
    out = io.StringIO()
    error = ExceptionGroup("outer", [ExceptionGroup("inner", [ValueError("boom\nsecond")])])
    assert report(error, out=out) == 1
    assert out.getvalue() == (
        "mcp-hub: unexpected error: ValueError: boom second "
        "(run again with --debug for the traceback)\n")


def test_a_config_error_keeps_its_exit_status_and_is_redacted() -> None:
    out = io.StringIO()
    assert report(ExceptionGroup("g", [ConfigError("x: token=abcdefgh")]), out=out) == 2
    assert out.getvalue() == "mcp-hub: config error: x: token=[REDACTED]\n"
