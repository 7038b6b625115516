"""Shared pieces of the proxy benchmarks: endpoints, the call workload, statistics.

Every endpoint is a real process spoken to with the ``mcp`` SDK's own client
(``ClientSession`` over ``stdio_client`` or ``streamable_http_client``). Every
loop is bounded by a call count and by a wall-clock budget; all traffic stays on
loopback.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
_VENV_PY = ROOT / ".venv" / "bin" / "python"
PY = str(_VENV_PY) if _VENV_PY.exists() else sys.executable

#: The echo fixture upstream, as a stdio command line (run from ROOT).
ECHO_ARGS = ["-m", "tests.fixtures.echo_server"]


def base_env(**extra: str) -> dict[str, str]:
    """The environment for every process the benchmarks start."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PATH"] = f"{Path(PY).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra)
    return env


# ------------------------------------------------------------------ statistics


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted sequence."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 50)


@dataclass
class LoadResult:
    """One cell of the workload: ``calls`` calls with ``concurrency`` in flight."""

    concurrency: int
    calls: int
    errors: int
    seconds: float
    latencies_ms: list[float] = field(repr=False, default_factory=list)

    @property
    def p50_ms(self) -> float:
        return percentile(sorted(self.latencies_ms), 50)

    @property
    def p99_ms(self) -> float:
        return percentile(sorted(self.latencies_ms), 99)

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else math.nan


# ------------------------------------------------------------------ workload


class CallFailed(RuntimeError):
    pass


async def call_once(session: ClientSession, tool: str, args: dict[str, Any]) -> None:
    result = await session.call_tool(tool, args)
    if result.is_error:
        raise CallFailed(f"{tool} returned isError: {result.content!r}")


async def run_load(session: ClientSession, tool: str, args: dict[str, Any], *,
                   concurrency: int, calls: int, max_seconds: float) -> LoadResult:
    """``calls`` calls of ``tool`` from ``concurrency`` workers sharing one session.

    Stops early when ``max_seconds`` have passed; the throughput is then
    computed over the calls actually made.
    """
    latencies: list[float] = []
    errors = 0
    issued = 0
    deadline = time.perf_counter() + max_seconds

    async def worker() -> None:
        nonlocal issued, errors
        while issued < calls and time.perf_counter() < deadline:
            issued += 1
            t0 = time.perf_counter()
            try:
                await call_once(session, tool, args)
            except Exception:
                errors += 1
                continue
            latencies.append((time.perf_counter() - t0) * 1000)

    start = time.perf_counter()
    with anyio.fail_after(max_seconds + 60):
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
    seconds = time.perf_counter() - start
    return LoadResult(concurrency, len(latencies), errors, seconds, latencies)


async def warm_up(session: ClientSession, tool: str, args: dict[str, Any], *,
                  calls: int = 200, concurrency: int = 8, max_seconds: float = 10) -> None:
    """Serial calls, then a concurrent burst: imports, caches and pools are hot after."""
    await run_load(session, tool, args, concurrency=1, calls=calls // 2,
                   max_seconds=max_seconds / 2)
    await run_load(session, tool, args, concurrency=concurrency, calls=calls,
                   max_seconds=max_seconds / 2)


async def interleaved_load(targets: dict[str, tuple[ClientSession, str]],
                           args: dict[str, Any], *, concurrency: int, calls: int,
                           rounds: int, chunk_seconds: float,
                           progress: Any = None) -> dict[str, LoadResult]:
    """The same workload against every target, in ``rounds`` alternating chunks.

    Alternating keeps a drift in background load on the machine from favouring
    whichever target happened to run first. Each target gets ``calls`` calls in
    total (``calls / rounds`` per chunk, each chunk bounded by ``chunk_seconds``);
    latencies are pooled and throughput is total calls over total time.
    """
    pooled: dict[str, LoadResult] = {
        name: LoadResult(concurrency, 0, 0, 0.0, []) for name in targets
    }
    per_chunk = max(concurrency, calls // rounds)
    for r in range(rounds):
        order = list(targets) if r % 2 == 0 else list(reversed(targets))
        for name in order:
            session, tool = targets[name]
            part = await run_load(session, tool, args, concurrency=concurrency,
                                  calls=per_chunk, max_seconds=chunk_seconds)
            acc = pooled[name]
            acc.calls += part.calls
            acc.errors += part.errors
            acc.seconds += part.seconds
            acc.latencies_ms.extend(part.latencies_ms)
            if progress is not None:
                progress(f"  c={concurrency} round {r + 1}/{rounds} {name}: "
                         f"{part.calls} calls, p50 {part.p50_ms:.2f} ms, "
                         f"{part.calls_per_s:.0f} calls/s")
    return pooled


def find_tool(names: Sequence[str], base: str) -> str:
    """The exposed name of the upstream tool ``base`` (proxies add their own prefix)."""
    pattern = re.compile(rf"(^|[_\-.:/]){re.escape(base)}$")
    hits = sorted((n for n in names if pattern.search(n)), key=len)
    if not hits:
        raise LookupError(f"no tool named like {base!r} among {sorted(names)}")
    return hits[0]


# ------------------------------------------------------------------ processes


def vm_status(pid: int, key: str = "VmRSS") -> int | None:
    """A ``/proc/PID/status`` memory field in KiB (VmRSS, VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def child_pids(ppid: int) -> set[int]:
    """Direct children of ``ppid`` (scans /proc; Linux only)."""
    out: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        # The command name is in parentheses and may itself contain spaces.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == ppid:
            out.add(int(entry))
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_port(port: int, proc: subprocess.Popen[bytes], within: float = 30,
                    what: str = "process") -> None:
    """Wait (at most ``within`` s) until ``proc`` accepts connections on loopback ``port``."""
    with anyio.fail_after(within):
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited early with code {proc.returncode}")
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return


async def stop_process(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        await anyio.to_thread.run_sync(lambda: proc.wait(grace))
    except subprocess.TimeoutExpired:
        proc.kill()
        await anyio.to_thread.run_sync(proc.wait)


# ------------------------------------------------------------------ endpoints


@dataclass
class Connected:
    """A live client session and the pid of the process it talks to (if known)."""

    session: ClientSession
    pid: int | None


@asynccontextmanager
async def stdio_endpoint(command: str, args: list[str], *, env: dict[str, str] | None = None,
                         cwd: str | Path | None = None, errlog: TextIO | None = None,
                         **session_kwargs: Any) -> AsyncIterator[Connected]:
    """Spawn ``command`` and speak MCP to it over stdio with the SDK's client."""
    params = StdioServerParameters(command=command, args=args, env=env or base_env(),
                                   cwd=str(cwd or ROOT))
    before = child_pids(os.getpid())
    log = errlog if errlog is not None else open(os.devnull, "w")  # noqa: SIM115
    try:
        async with stdio_client(params, errlog=log) as (read, write):
            spawned = child_pids(os.getpid()) - before
            pid = min(spawned) if len(spawned) == 1 else None
            async with ClientSession(read, write, **session_kwargs) as session:
                await session.initialize()
                yield Connected(session, pid)
    finally:
        if errlog is None:
            log.close()


@asynccontextmanager
async def http_endpoint(url: str, pid: int | None = None,
                        **session_kwargs: Any) -> AsyncIterator[Connected]:
    """Speak Streamable HTTP to ``url`` with the SDK's client."""
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield Connected(session, pid)


# ------------------------------------------------------------------ hub config


def hub_config(path: Path, servers: dict[str, dict[str, str]], *,
               startup_timeout: float = 30) -> Path:
    """A ``servers.toml`` with one stdio echo upstream per entry of ``servers``.

    ``servers`` maps a server name to the extra environment of that upstream.
    """
    lines = ["[hub]", f"startup_timeout = {startup_timeout}", 'log_level = "warning"', ""]
    for name, env in servers.items():
        lines += [
            f"[servers.{name}]",
            f"command = {json.dumps(PY)}",
            f"args = {json.dumps(ECHO_ARGS)}",
            f"cwd = {json.dumps(str(ROOT))}",
        ]
        if env:
            inner = ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items())
            lines.append(f"env = {{ {inner} }}")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def hub_command(config: Path, *extra: str) -> list[str]:
    return ["-m", "mcp_hub", "serve", "--config", str(config), *extra]


# ------------------------------------------------------------------ output


def fmt_ms(value: float) -> str:
    if value != value:  # NaN
        return "—"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def fmt_ratio(value: float | None) -> str:
    if value is None or value != value:
        return "—"
    return f"{value:.2f}×"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"
    out = [line(headers), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(r) for r in rows]
    return "\n".join(out)
