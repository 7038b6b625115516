"""Real system services for the replica tests: redis-server and haproxy, started here.

The port helpers are the benchmarks' own (:mod:`bench.common`).
Both come from Debian's packages, installed by ``.ci/setup-system``. When a binary
is missing the test skips with the reason, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from bench.common import free_port, wait_port

ROOT = Path(__file__).resolve().parents[1]
HAPROXY_CFG = ROOT / "deploy" / "haproxy" / "haproxy.cfg"


def require_binary(name: str) -> str:
    """The path of ``name``; skip (fail under CI=true) when it is not installed."""
    found = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)
    if found is None:
        reason = f"{name} is not installed (run .ci/setup-system)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


class RedisServer:
    """A redis-server on a loopback port that can be stopped and started again."""

    def __init__(self, binary: str, port: int, workdir: Path) -> None:
        self.binary = binary
        self.port = port
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        await wait_port(self.port, self.proc, 15, "redis-server")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            proc = self.proc
            await anyio.to_thread.run_sync(lambda: proc.wait(10))
        self.proc = None


@asynccontextmanager
async def redis_server(workdir: Path) -> AsyncIterator[RedisServer]:
    server = RedisServer(require_binary("redis-server"), free_port(), workdir)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def haproxy(backends: list[int], workdir: Path) -> AsyncIterator[int]:
    """deploy/haproxy/haproxy.cfg in front of ``backends`` (three ports); yields its port."""
    binary = require_binary("haproxy")
    port = free_port()
    env = dict(os.environ, MCP_HUB_LB_BIND=f"127.0.0.1:{port}",
               **{f"MCP_HUB_{i + 1}": f"127.0.0.1:{p}" for i, p in enumerate(backends)})
    log = (workdir / "haproxy.log").open("wb")
    proc = subprocess.Popen([binary, "-db", "-f", str(HAPROXY_CFG)], env=env,
                            stdout=log, stderr=log)
    try:
        await wait_port(port, proc, 15, "haproxy")
        yield port
    finally:
        proc.terminate()
        await anyio.to_thread.run_sync(lambda: proc.wait(10))
        log.close()
