"""Helpers for the upstream tests: configs, a hub-side manager, HTTP upstream processes.

Everything starts real things (stdio children, uvicorn subprocesses) and every
wait is bounded by the caller's ``anyio.fail_after``.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp.types as types

from mcp_hub.config.model import HubConfig, parse_config
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.upstream import ServerState, UpstreamManager

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
FIXTURES = Path(__file__).resolve().parent


def toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def echo_block(name: str = "echo", *, prefix: str | None = None,
               env: dict[str, str] | None = None, extra: str = "") -> str:
    """``[servers.NAME]`` running the echo fixture over stdio."""
    lines = [
        f"[servers.{name}]",
        f"command = {toml_str(PY)}",
        'args = ["-m", "tests.fixtures.echo_server"]',
        f"cwd = {toml_str(str(ROOT))}",
    ]
    if prefix is not None:
        lines.append(f"prefix = {toml_str(prefix)}")
    if env:
        inner = ", ".join(f"{k} = {toml_str(v)}" for k, v in env.items())
        lines.append(f"env = {{ {inner} }}")
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


def script_block(name: str, script: str, *, extra: str = "") -> str:
    """``[servers.NAME]`` running ``tests/fixtures_upstream/<script>`` over stdio."""
    return (
        f"[servers.{name}]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / script))}]\n{extra}\n"
    )


class RecordingRegistry(ToolRegistry):
    """A real registry that also records every register/deregister call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def register(self, name: str, toolset: str, *args: Any, **kwargs: Any) -> bool:
        self.calls.append(("register", name))
        return super().register(name, toolset, *args, **kwargs)

    def deregister(self, name: str) -> bool:
        self.calls.append(("deregister", name))
        return super().deregister(name)

    def deregister_toolset(self, toolset: str) -> list[str]:
        removed = super().deregister_toolset(toolset)
        self.calls.extend(("deregister", n) for n in removed)
        return removed


@asynccontextmanager
async def running(
    body: str, *, registry: ToolRegistry | None = None, hub: str = "", **kwargs: Any
) -> AsyncIterator[tuple[UpstreamManager, ToolRegistry]]:
    """An entered UpstreamManager over the config ``body``, after the first attempts."""
    config: HubConfig = parse_config(f"[hub]\n{hub}\n{body}")
    reg = registry if registry is not None else ToolRegistry()
    async with UpstreamManager(config, reg, **kwargs) as manager:
        await manager.wait_ready(60)
        yield manager, reg


def state_of(manager: UpstreamManager, name: str) -> ServerState:
    return next(s.state for s in manager.statuses() if s.name == name)


def is_state(manager: UpstreamManager, name: str, state: ServerState) -> Callable[[], bool]:
    return lambda: state_of(manager, name) is state


def text_of(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_port(port: int, proc: anyio.abc.Process) -> None:
    while True:
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            assert proc.returncode is None, "the HTTP upstream exited"
            await anyio.sleep(0.05)  # polling a port: there is no event to wait on
        else:
            await stream.aclose()
            return


@asynccontextmanager
async def http_upstream(transport: str, port: int | None = None) -> AsyncIterator[
    tuple[int, anyio.abc.Process]
]:
    """The echo fixture served over ``http`` or ``sse`` by uvicorn in a subprocess."""
    port = port or free_port()
    cmd = [PY, "-m", "tests.fixtures.echo_server", "--transport", transport, "--port", str(port)]
    proc = await anyio.open_process(cmd, cwd=ROOT, stdout=None, stderr=None)
    try:
        await wait_port(port, proc)
        yield port, proc
    finally:
        if proc.returncode is None:
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()


class ProgressSeen(CallContext):
    """A downstream call that asked for progress; ``first`` fires at the first report."""

    def __init__(self) -> None:
        super().__init__(progress_token="tok")
        self.first = anyio.Event()
        self.reports: list[float] = []

    async def report_progress(self, progress: float, total: float | None = None,
                              message: str | None = None) -> None:
        self.reports.append(progress)
        self.first.set()


async def kill_mid_call(manager: UpstreamManager, registry: ToolRegistry, *, within: float,
                        server: str = "echo") -> tuple[types.CallToolResult, int]:
    """A slow call of ``server``'s ``slow`` tool, its stdio child killed with SIGKILL once the
    call reports progress (it is running upstream); the call's result, which must come
    within ``within`` seconds of the kill, and the killed pid."""
    conn = manager.connection(server)
    assert conn is not None and conn.pid is not None
    pid = conn.pid
    call = ProgressSeen()
    results: list[types.CallToolResult] = []
    done = anyio.Event()

    async def slow() -> None:
        results.append(await registry.dispatch(
            f"{server}_slow", {"seconds": 30, "steps": 300}, call=call))
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        await call.first.wait()
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(within):
            await done.wait()
    (result,) = results
    return result, pid
