"""What the hub costs per call: direct to a stdio upstream vs through mcp-hub.

One command, from the repository root::

    .venv/bin/python bench/proxy_bench.py

Targets, all with the ``mcp`` SDK's own client and the echo fixture upstream
(``tests.fixtures.echo_server``), calling its trivial ``echo`` tool:

* ``direct stdio``  — the client spawns the upstream and talks to it over stdio;
* ``hub stdio``     — the client spawns ``mcp-hub serve``, which spawns the upstream;
* ``hub http``      — ``mcp-hub serve --transport http`` on a loopback port,
  Streamable HTTP from the client, stdio to the upstream;
* ``direct http``   — reference only: the upstream itself served over Streamable
  HTTP, to separate what the HTTP transport costs from what the hub costs;
* ``hub stdio otel``, ``hub http otel`` — the same hubs with telemetry on
  (``[telemetry]``, sample ratio 1.0) exporting to an OTLP/HTTP sink in this
  process (tests/otlp_receiver.py, counting only); ``hub stdio otel-dead`` exports to a port where
  nothing listens. Not run by default: ``--targets`` names them, and a second
  table then compares each with the same hub with telemetry off.

For 1 and 32 concurrent calls on one session: p50/p99 latency, calls/s and the
ratios to ``direct stdio``. Warm-up first; the measured calls are split into
chunks that alternate between targets, so background load on the machine
favours none of them. Bounded: about 1–2 minutes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ECHO_ARGS,
    PY,
    ROOT,
    Connected,
    LoadResult,
    base_env,
    find_tool,
    fmt_ms,
    fmt_ratio,
    free_port,
    http_endpoint,
    hub_command,
    hub_config,
    interleaved_load,
    markdown_table,
    stdio_endpoint,
    stop_process,
    wait_port,
    warm_up,
)
from tests.otlp_receiver import otlp_receiver

CONCURRENCY = (1, 32)
CALLS = {1: 1500, 32: 3000}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@asynccontextmanager
async def hub_http(tmp: Path, config: Path) -> AsyncIterator[Connected]:
    """``mcp-hub serve --transport http --port 0``; connect once /readyz says so."""
    port_file = tmp / "hub.port"
    with open(tmp / "hub-http.log", "w") as err:
        proc = subprocess.Popen(
            [PY, *hub_command(config, "--transport", "http", "--port", "0",
                              "--port-file", str(port_file))],
            cwd=ROOT, env=base_env(), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        with anyio.fail_after(60):
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.poll() is not None:
                    raise RuntimeError(f"hub exited with code {proc.returncode}: "
                                       f"{(tmp / 'hub-http.log').read_text()[-500:]}")
                await anyio.sleep(0.05)
            base = f"http://127.0.0.1:{int(port_file.read_text())}"
            async with httpx2.AsyncClient() as probe:
                while True:
                    try:
                        if (await probe.get(f"{base}/readyz")).status_code == 200:
                            break
                    except httpx2.TransportError:
                        pass
                    await anyio.sleep(0.05)
        async with http_endpoint(f"{base}/mcp", pid=proc.pid) as conn:
            yield conn
    finally:
        await stop_process(proc)


@asynccontextmanager
async def direct_http(tmp: Path) -> AsyncIterator[Connected]:
    port = free_port()
    with open(tmp / "echo-http.log", "w") as err:
        proc = subprocess.Popen([PY, *ECHO_ARGS, "--transport", "http", "--port", str(port)],
                                cwd=ROOT, env=base_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        await wait_port(port, proc)
        async with http_endpoint(f"http://127.0.0.1:{port}/mcp", pid=proc.pid) as conn:
            yield conn
    finally:
        await stop_process(proc)


def _with_telemetry(config: Path, path: Path, endpoint: str) -> Path:
    path.write_text(config.read_text() + f'\n[telemetry]\notlp_endpoint = "{endpoint}"\n'
                    "sample_ratio = 1.0\n")
    return path


#: ``--base-tree DIR``: the hub of another checkout, run as target ``hub stdio (base)``.
BASE_TREE: Path | None = None


def endpoints(tmp: Path, sink: str) -> dict[str, Callable[[], AbstractAsyncContextManager[Connected]]]:
    config = hub_config(tmp / "servers.toml", {"echo": {}})
    otel = _with_telemetry(config, tmp / "servers-otel.toml", sink)
    dead = _with_telemetry(config, tmp / "servers-otel-dead.toml", f"http://127.0.0.1:{free_port()}")
    errlog = open(tmp / "stdio.log", "w")  # noqa: SIM115 - closed with the process
    return {
        "direct stdio": lambda: stdio_endpoint(PY, list(ECHO_ARGS), errlog=errlog),
        "hub stdio": lambda: stdio_endpoint(PY, hub_command(config), errlog=errlog),
        "hub http": lambda: hub_http(tmp, config),
        "direct http": lambda: direct_http(tmp),
        "hub stdio otel": lambda: stdio_endpoint(PY, hub_command(otel), errlog=errlog),
        "hub http otel": lambda: hub_http(tmp, otel),
        "hub stdio otel-dead": lambda: stdio_endpoint(PY, hub_command(dead), errlog=errlog),
        "hub stdio (base)": lambda: stdio_endpoint(PY, hub_command(config), cwd=BASE_TREE, errlog=errlog),
    }


async def run(args: argparse.Namespace) -> tuple[dict[str, dict[int, LoadResult]], dict[str, str]]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-hub-bench-"))
    log(f"logs and configs: {tmp}")
    with otlp_receiver(decode=False) as (sink, received):
        results, errors = await _run(args, tmp, sink)
    if received.counts:
        log(f"OTLP receiver got: {received.counts}")
    return results, errors


async def _run(args: argparse.Namespace, tmp: Path, sink: str
               ) -> tuple[dict[str, dict[int, LoadResult]], dict[str, str]]:
    factories = {k: v for k, v in endpoints(tmp, sink).items() if k in args.targets}
    live: dict[str, tuple[Any, str]] = {}
    errors: dict[str, str] = {}
    stop = anyio.Event()

    async def hold(name: str, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        scope = anyio.CancelScope(deadline=anyio.current_time() + 60)
        try:
            with scope:
                async with factories[name]() as conn:
                    listed = await conn.session.list_tools()
                    tool = find_tool([t.name for t in listed.tools], "echo")
                    await warm_up(conn.session, tool, {"text": "warm"}, calls=300,
                                  concurrency=32)
                    live[name] = (conn.session, tool)
                    log(f"{name}: ready (tool {tool!r})")
                    scope.deadline = float("inf")
                    task_status.started()
                    await stop.wait()
            if scope.cancelled_caught and name not in live:
                raise TimeoutError("not ready within 60 s")
        except Exception as exc:  # reported; the other targets still run
            if name not in live:
                errors[name] = f"{type(exc).__name__}: {exc}"[:300]
                log(f"{name}: failed: {errors[name]}")
                task_status.started()

    results: dict[str, dict[int, LoadResult]] = {name: {} for name in factories}
    async with anyio.create_task_group() as tg:
        for name in factories:
            await tg.start(hold, name)
        try:
            for conc in CONCURRENCY:
                calls = max(conc, int(CALLS[conc] * args.scale))
                log(f"load: {conc} concurrent, {calls} calls per target")
                cell = await interleaved_load(
                    live, {"text": "hello"}, concurrency=conc, calls=calls,
                    rounds=args.rounds, chunk_seconds=args.chunk_seconds, progress=log)
                for name, res in cell.items():
                    results[name][conc] = res
        finally:
            stop.set()
    return results, errors


def report(results: dict[str, dict[int, LoadResult]], errors: dict[str, str]) -> str:
    base = results.get("direct stdio", {})
    rows = []
    for name, cells in results.items():
        if name in errors:
            rows.append([name, "—", "failed", "", "", "", "", errors[name][:80]])
            continue
        for conc, res in cells.items():
            ref = base.get(conc)
            rows.append([
                name, str(conc), fmt_ms(res.p50_ms), fmt_ms(res.p99_ms),
                f"{res.calls_per_s:.0f}",
                fmt_ratio(res.p50_ms / ref.p50_ms) if ref else "—",
                f"{res.p50_ms - ref.p50_ms:+.2f}" if ref else "—",
                fmt_ratio(res.calls_per_s / ref.calls_per_s) if ref else "—",
            ])
    table = markdown_table(
        ["target", "concurrent", "p50 ms", "p99 ms", "calls/s", "p50 vs direct",
         "added p50 ms", "calls/s vs direct"], rows)
    return table + _telemetry_report(results, errors)


def _telemetry_report(results: dict[str, dict[int, LoadResult]], errors: dict[str, str]) -> str:
    """Each telemetry target against the same hub with telemetry off, side by side."""
    rows = []
    for name, cells in results.items():
        if " otel" not in name or name in errors:
            continue
        off = results.get(name.split(" otel")[0], {})
        for conc, res in cells.items():
            ref = off.get(conc)
            if ref is None:
                continue
            rows.append([name, str(conc), f"{res.p50_ms - ref.p50_ms:+.3f}",
                         f"{res.p99_ms - ref.p99_ms:+.3f}",
                         fmt_ratio(res.calls_per_s / ref.calls_per_s)])
    if not rows:
        return ""
    return "\n\nTelemetry on vs off (same transport):\n\n" + markdown_table(
        ["target", "concurrent", "added p50 ms", "added p99 ms", "calls/s vs off"], rows)


def main(argv: list[str] | None = None) -> int:
    names = ["direct stdio", "hub stdio", "hub http", "direct http"]
    otel = ["hub stdio otel", "hub http otel", "hub stdio otel-dead"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=names, choices=names + otel)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the call counts (default 1.0: 1500 and 3000 calls)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk-seconds", type=float, default=5.0,
                        help="time budget of one chunk (default 5 s; bounds the run to ~2 min)")
    parser.add_argument("--base-tree", type=Path, metavar="DIR",
                        help="also run the hub of another checkout (e.g. `git archive` of a commit "
                             "unpacked in DIR) over stdio as target 'hub stdio (base)', interleaved")
    args = parser.parse_args(argv)
    if args.base_tree is not None:
        global BASE_TREE
        BASE_TREE = args.base_tree.resolve()
        args.targets.append("hub stdio (base)")
    if "direct stdio" not in args.targets:
        args.targets.insert(0, "direct stdio")
    started = time.perf_counter()
    results, errors = anyio.run(run, args)
    load = os.getloadavg()
    print(f"# mcp-hub proxy overhead ({time.strftime('%Y-%m-%d %H:%M')}; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f}; "
          f"run took {time.perf_counter() - started:.0f} s)\n")
    print(report(results, errors))
    return 1 if "hub stdio" in errors else 0


if __name__ == "__main__":
    sys.exit(main())
