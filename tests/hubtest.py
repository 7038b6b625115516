"""Helpers shared by the tests that run a real hub: configs, processes, clients.

Everything here starts real things — the hub as a subprocess (stdio or HTTP on
an ephemeral loopback port), real upstream servers — and every wait is bounded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.abc import ObjectSendStream
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from bench.common import free_port, stop_process, wait_port

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
NODE_BIN = ROOT / "js" / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"
#: ``pytestmark`` of a module whose every test runs server-everything: anyio, ``node``,
#: and a skip where the Node packages are not installed.
EVERYTHING_MARKS = [
    pytest.mark.anyio,
    pytest.mark.node,
    pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)"),
]


def echo_server_toml(name: str = "echo", *, prefix: str | None = None,
                     env: dict[str, str] | None = None, extra: str = "") -> str:
    """A ``[servers.NAME]`` block running the echo fixture over stdio."""
    lines = [
        f"[servers.{name}]",
        f"command = {PY!r}".replace("'", '"'),
        'args = ["-m", "tests.fixtures.echo_server"]',
        f'cwd = "{ROOT}"',
    ]
    if prefix is not None:
        lines.append(f'prefix = "{prefix}"')
    if env:
        inner = ", ".join(f'{k} = "{v}"' for k, v in env.items())
        lines.append(f"env = {{ {inner} }}")
    if extra:
        lines.append(extra)
    return "\n".join(lines) + "\n"


def write_config(tmp: Path, body: str, *, hub: str = "") -> Path:
    """``servers.toml`` with ``body``. The tests built on it call the echo fixture's
    ``echo`` tool of server ``echo`` by its fully prefixed name, ``echo_echo``, so it
    keeps every name prefixed (``dedupe_prefix = false``); the default is tested in
    test_upstream_naming.py."""
    path = tmp / "servers.toml"
    head = "[hub]\nstartup_timeout = 20\ndedupe_prefix = false\n" + hub + "\n"
    path.write_text(head + body)
    return path


def everything_toml(upstream: str, *, tool_search: str = "off") -> str:
    """``[servers.ev]``, server-everything with its names unprefixed, over stdio
    (``upstream`` is "stdio") or at the URL ``upstream``; ``[tool_search] mode``
    off keeps every tool listed, as directly."""
    stdio = f'command = "{EVERYTHING}"\nargs = ["stdio"]\n'
    where = stdio if upstream == "stdio" else f'url = "{upstream}"\n'
    return f'[servers.ev]\n{where}prefix = ""\n\n[tool_search]\nmode = "{tool_search}"\n'


def hub_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = f"{Path(PY).parent}{os.pathsep}{NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def stdio_hub_params(config: Path, *extra_args: str) -> StdioServerParameters:
    """How to start ``mcp-hub serve`` as a stdio subprocess of a client."""
    return StdioServerParameters(
        command=PY, args=["-m", "mcp_hub", "serve", "--config", str(config), *extra_args],
        cwd=str(ROOT), env=hub_env(),
    )


@asynccontextmanager
async def stdio_hub(config: Path, *extra_args: str, **session_kwargs: Any
                    ) -> AsyncIterator[ClientSession]:
    """The hub as a stdio subprocess, with an initialised SDK client session."""
    async with (
        stdio_client(stdio_hub_params(config, *extra_args)) as (read, write),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield session


class HttpHub:
    """A hub process serving HTTP on an ephemeral loopback port."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, stderr_path: Path) -> None:
        self.proc = proc
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.stderr_path = stderr_path

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def show_log(what: str, path: Path, limit: int = 20_000) -> None:
    """The last ``limit`` characters of a child's log, on this process's stderr."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return
    sys.stderr.write(f"--- {what} log {path} (last {limit} chars) ---\n{text[-limit:]}\n")


@asynccontextmanager
async def http_hub(config: Path, tmp: Path, *extra_args: str,
                   timeout: float = 30, probe: str = "/readyz") -> AsyncIterator[HttpHub]:  # noqa: ASYNC109
    """Start ``mcp-hub serve --transport http --port 0`` and wait until ``probe`` is 200
    (``/healthz`` to start using it before the upstreams are ready)."""
    port_file = tmp / f"port-{os.getpid()}-{id(config)}-{len(extra_args)}"
    port_file.unlink(missing_ok=True)
    stderr_path = tmp / f"hub-stderr-{port_file.name}.log"
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [PY, "-m", "mcp_hub", "serve", "--transport", "http", "--port", "0",
             "--config", str(config), "--port-file", str(port_file), *extra_args],
            cwd=str(ROOT), env=hub_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err,
        )
    try:
        with anyio.fail_after(timeout):
            while not port_file.exists() or not port_file.read_text():
                if proc.poll() is not None:
                    raise RuntimeError(f"hub exited early:\n{stderr_path.read_text()}")
                await anyio.sleep(0.05)
            port = int(port_file.read_text())
            hub = HttpHub(proc, port, stderr_path)
            async with httpx2.AsyncClient() as client:
                while True:
                    try:
                        r = await client.get(f"{hub.base}{probe}")
                        if r.status_code == 200:
                            break
                    except httpx2.TransportError:
                        pass
                    await anyio.sleep(0.05)
        yield hub
    except BaseException:
        # The test failed (or timed out) with the hub running: its log goes to the
        # test's captured stderr, which pytest prints with the failure.
        show_log("hub", stderr_path)
        raise
    finally:
        proc.terminate()
        try:
            await anyio.to_thread.run_sync(lambda: proc.wait(15))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def everything_http(tmp: Path, port: int | None = None) -> AsyncIterator[str]:
    """server-everything in ``streamableHttp`` mode on a free port; yields its /mcp URL."""
    port = port or free_port()
    env = hub_env()
    env["PORT"] = str(port)
    log = tmp / f"everything-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(EVERYTHING), "streamableHttp"], cwd=str(ROOT), env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        try:
            await wait_port(port, proc, 20, "server-everything")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{log.read_text()}") from exc
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await stop_process(proc, 10)
        proc.wait()


@asynccontextmanager
async def http_session(url: str, *, headers: dict[str, str] | None = None,
                       **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def sse_session(url: str, **session_kwargs: Any) -> AsyncIterator[ClientSession]:
    async with (
        sse_client(url) as (read, write),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield session


def text_of(result: types.CallToolResult) -> str:
    """The text parts of a tool's result, joined by spaces."""
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


def dump(result: Any) -> Any:
    """A result as plain JSON, for comparing hub and direct answers."""
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


async def sse_events(response: httpx2.Response) -> AsyncIterator[tuple[str | None, str]]:
    """(event id, data) of each SSE event of a streamed response, as they arrive."""
    event_id: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data or event_id is not None:
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


def rpc_messages(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST answer, plain JSON or an SSE stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    return [json.loads(line[5:]) for line in response.text.splitlines()
            if line.startswith("data:") and line[5:].strip()]


async def send_sse_messages(response: httpx2.Response,
                            send: ObjectSendStream[dict[str, Any]]) -> None:
    """Send each JSON-RPC message of a streamed SSE response to ``send``, as it arrives."""
    async for line in response.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            await send.send(json.loads(line[5:]))
