"""The ``terminal`` builtin: a bounded shell command in its own process group."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

import builtin_tools.terminal  # noqa: F401 - registers the tool
from mcp_hub.config.model import HubConfig, parse_config
from mcp_hub.pipeline import runtime
from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import registry

pytestmark = pytest.mark.anyio


def configure(body: str = "", *, source: Path | None = None) -> None:
    runtime.set_config(parse_config(f"[builtins.terminal]\n{body}", source=source))
    registry.invalidate_check_fn_cache()


@pytest.fixture(autouse=True)
def _restore_runtime() -> Iterator[None]:
    yield
    runtime.set_config(HubConfig())
    runtime.set_listener(runtime.Listener())
    registry.invalidate_check_fn_cache()


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    configure(f"enabled = true\ncwd = {json.dumps(str(tmp_path))}\n")
    return tmp_path


async def call(args: dict[str, Any], limit: float = 20) -> CallToolResult:
    with anyio.fail_after(limit):
        return await handle_function_call("terminal", args, call=CallContext(tool_name="terminal"))


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def wait_gone(pid: int) -> None:
    with anyio.fail_after(5):
        while alive(pid):
            await anyio.sleep(0.01)


async def read_pid(path: Path) -> int:
    with anyio.fail_after(5):
        while not path.exists() or not path.read_text().strip():
            await anyio.sleep(0.01)
    return int(path.read_text())


# ── availability ──


def listed() -> bool:
    return "terminal" in {d["name"] for d in registry.get_definitions()}


def test_the_terminal_is_hidden_unless_enabled() -> None:
    configure("")
    assert not listed()
    configure("enabled = true\n")
    assert listed()


async def test_a_disabled_terminal_refuses_to_run() -> None:
    configure("")
    result = await call({"command": "echo hi"})
    assert result.is_error and "disabled" in text(result)


async def test_the_terminal_refuses_when_exposed_without_auth(workdir: Path) -> None:
    runtime.set_listener(runtime.Listener(transport="http", host="0.0.0.0", authenticated=False))
    assert not listed()
    result = await call({"command": "echo hi"})
    assert result.is_error and "non-loopback" in text(result)
    runtime.set_listener(runtime.Listener(transport="http", host="0.0.0.0", authenticated=True))
    registry.invalidate_check_fn_cache()
    assert listed()


# ── running ──


async def test_a_command_runs_in_the_configured_directory(workdir: Path) -> None:
    result = await call({"command": "pwd; echo oops >&2; exit 3"})
    assert not result.is_error
    data = json.loads(text(result))
    assert data["exit_code"] == 3
    assert data["timed_out"] is False
    lines = data["output"].splitlines()
    assert Path(lines[0]).resolve() == workdir.resolve()
    assert "oops" in lines  # stderr merged into the output


async def test_a_relative_cwd_is_taken_from_the_config_folder(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    configure('enabled = true\ncwd = "work"\n', source=tmp_path / "servers.toml")
    data = json.loads(text(await call({"command": "pwd"})))
    assert Path(data["output"].strip()).resolve() == (tmp_path / "work").resolve()


async def test_stdin_is_closed_so_interactive_commands_do_not_hang(workdir: Path) -> None:
    data = json.loads(text(await call({"command": "cat; echo done"})))
    assert data["output"] == "done\n"
    assert data["timed_out"] is False


async def test_a_blocklisted_command_is_refused(workdir: Path) -> None:
    result = await call({"command": "rm -rf /"})
    assert result.is_error
    assert "blocklist" in text(result)
    configure(f'enabled = true\ncwd = {json.dumps(str(workdir))}\nblocklist = ["\\\\bcurl\\\\b"]\n')
    assert (await call({"command": "curl http://example.invalid"})).is_error
    assert not (await call({"command": "echo curling"})).is_error


async def test_huge_output_keeps_its_head_and_tail_around_a_marker(workdir: Path) -> None:
    data = json.loads(text(await call({"command": "seq 1 200000"})))
    output = data["output"]
    assert data["truncated"] is True
    assert output.startswith("1\n2\n")
    assert output.endswith("199999\n200000\n")
    assert "output truncated" in output
    assert len(output) < 10_000 + 200


async def test_a_timeout_kills_the_children_of_the_commands_children(workdir: Path) -> None:
    pidfile = workdir / "grandchild.pid"
    inner = f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}; wait"
    result = await call({"command": f"sh -c {shlex.quote(inner)}; echo never", "timeout": 1})
    data = json.loads(text(result))
    assert data["timed_out"] is True
    assert "never" not in data["output"]
    await wait_gone(await read_pid(pidfile))


async def test_the_timeout_argument_can_only_shorten_the_configured_one(workdir: Path) -> None:
    configure(f"enabled = true\ncwd = {json.dumps(str(workdir))}\ntimeout = 0.5\n")
    data = json.loads(text(await call({"command": "sleep 30", "timeout": 600})))
    assert data["timed_out"] is True


async def test_background_jobs_do_not_outlive_the_command(workdir: Path) -> None:
    pidfile = workdir / "background.pid"
    result = await call({"command": f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}"})
    data = json.loads(text(result))
    assert data["exit_code"] == 0 and data["timed_out"] is False
    await wait_gone(await read_pid(pidfile))


async def test_cancelling_the_call_kills_the_process_group(workdir: Path) -> None:
    pidfile = workdir / "cancelled.pid"
    command = f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}; wait"
    async with anyio.create_task_group() as tg:
        tg.start_soon(call, {"command": command})
        pid = await read_pid(pidfile)
        assert alive(pid)
        tg.cancel_scope.cancel()
    await wait_gone(pid)


async def test_the_command_runs_while_the_event_loop_serves_other_tasks(workdir: Path) -> None:
    fifo = workdir / "fifo"
    os.mkfifo(fifo)
    results: list[CallToolResult] = []

    async def run() -> None:
        results.append(await call({"command": f"cat {shlex.quote(str(fifo))}", "timeout": 10}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        # Opening the FIFO for writing waits for the command to open it for reading.
        await anyio.to_thread.run_sync(fifo.write_text, "from the loop\n")
    data = json.loads(text(results[0]))
    assert data["output"] == "from the loop\n"
    assert data["timed_out"] is False
