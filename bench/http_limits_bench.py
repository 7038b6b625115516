"""What the HTTP connection limits cost: the hub's protocol vs uvicorn's, side by side.

One command, from the repository root::

    .venv/bin/python bench/http_limits_bench.py

Three hub processes, identical but for the HTTP protocol (see
``bench/http_protocol_server.py``):

* ``httptools``  — uvicorn's httptools protocol, no header limits (the old default);
* ``limited``    — what the hub serves with: httptools plus header size/count
  limits, header/body/keep-alive timeouts and the per-address cap;
* ``h11``        — uvicorn's h11 protocol with its incomplete-event cap.

Two workloads, each interleaved across the targets in alternating chunks so
background load favours none: ``tools/call`` of the echo upstream with the
SDK's Streamable HTTP client (1 and 32 concurrent), and bare ``GET /healthz``
on keep-alive connections (the protocol's share of the work is largest there).
Prints calls/s and p50 per target and the ratio to ``httptools``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    PY,
    ROOT,
    LoadResult,
    base_env,
    find_tool,
    fmt_ms,
    fmt_ratio,
    http_endpoint,
    hub_config,
    interleaved_load,
    markdown_table,
    percentile,
    stop_process,
    warm_up,
)

PROTOCOLS = ("httptools", "limited", "h11")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@asynccontextmanager
async def serve(tmp: Path, config: Path, protocol: str) -> AsyncIterator[str]:
    port_file = tmp / f"{protocol}.port"
    with open(tmp / f"{protocol}.log", "w") as err:
        proc = subprocess.Popen(
            [PY, str(ROOT / "bench" / "http_protocol_server.py"), str(config), str(port_file), protocol],
            cwd=ROOT, env=base_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        with anyio.fail_after(60):
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.poll() is not None:
                    raise RuntimeError((tmp / f"{protocol}.log").read_text()[-500:])
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
        yield base
    finally:
        await stop_process(proc)


async def healthz_load(bases: dict[str, str], *, concurrency: int, requests: int,
                       rounds: int) -> dict[str, LoadResult]:
    pooled = {name: LoadResult(concurrency, 0, 0, 0.0, []) for name in bases}
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(limits=limits, timeout=30) as http:
        for r in range(rounds):
            order = list(bases) if r % 2 == 0 else list(reversed(bases))
            for name in order:
                url = f"{bases[name]}/healthz"
                left = requests // rounds
                acc = pooled[name]

                async def worker(url: str = url, acc: LoadResult = acc) -> None:
                    nonlocal left
                    while left > 0:
                        left -= 1
                        t0 = time.perf_counter()
                        response = await http.get(url)
                        if response.status_code != 200:
                            acc.errors += 1
                            continue
                        acc.latencies_ms.append((time.perf_counter() - t0) * 1000)
                        acc.calls += 1

                started = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(concurrency):
                        tg.start_soon(worker)
                acc.seconds += time.perf_counter() - started
    return pooled


async def run(args: argparse.Namespace) -> dict[str, dict[str, LoadResult]]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-hub-limits-bench-"))
    log(f"logs and configs: {tmp}")
    config = hub_config(tmp / "servers.toml", {"echo": {}})
    results: dict[str, dict[str, LoadResult]] = {p: {} for p in PROTOCOLS}
    async with (serve(tmp, config, "httptools") as b1, serve(tmp, config, "limited") as b2,
                serve(tmp, config, "h11") as b3):
        bases = dict(zip(PROTOCOLS, (b1, b2, b3), strict=True))
        for conc in (1, 32):
            cell = await healthz_load(bases, concurrency=conc, requests=int(4000 * args.scale),
                                      rounds=args.rounds)
            for name, res in cell.items():
                results[name][f"GET /healthz c={conc}"] = res
            log(f"healthz c={conc}: " + ", ".join(f"{n} {r.calls_per_s:.0f}/s" for n, r in cell.items()))
        async with (http_endpoint(f"{b1}/mcp") as c1, http_endpoint(f"{b2}/mcp") as c2,
                    http_endpoint(f"{b3}/mcp") as c3):
            targets: dict[str, tuple[Any, str]] = {}
            for name, conn in zip(PROTOCOLS, (c1, c2, c3), strict=True):
                tool = find_tool([t.name for t in (await conn.session.list_tools()).tools], "echo")
                await warm_up(conn.session, tool, {"text": "warm"}, calls=200, concurrency=16)
                targets[name] = (conn.session, tool)
            for conc in (1, 32):
                cell = await interleaved_load(
                    targets, {"text": "hello"}, concurrency=conc, calls=int(1500 * args.scale),
                    rounds=args.rounds, chunk_seconds=args.chunk_seconds, progress=log)
                for name, res in cell.items():
                    results[name][f"tools/call c={conc}"] = res
    return results


def report(results: dict[str, dict[str, LoadResult]]) -> str:
    rows = []
    for name, cells in results.items():
        for workload, res in cells.items():
            ref = results["httptools"][workload]
            p50 = percentile(sorted(res.latencies_ms), 50) if res.latencies_ms else float("nan")
            rows.append([workload, name, f"{res.calls_per_s:.0f}", fmt_ms(p50),
                         fmt_ratio(res.calls_per_s / ref.calls_per_s), str(res.errors)])
    rows.sort(key=lambda r: (r[0], PROTOCOLS.index(r[1])))
    return markdown_table(["workload", "protocol", "per s", "p50 ms", "per s vs httptools", "errors"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = anyio.run(run, args)
    load = os.getloadavg()
    print(f"# HTTP connection limits: cost per protocol ({time.strftime('%Y-%m-%d %H:%M')}; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f}; run took "
          f"{time.perf_counter() - started:.0f} s)\n")
    print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
