"""The upstream hop alone: the lean ``tools/call`` against the SDK's ``send_request``.

One command, from the repository root::

    .venv/bin/python bench/upstream_hop_bench.py --calls 2000 --rounds 3

In one process, one :class:`~mcp_hub.upstream.manager.UpstreamManager` with the
echo fixture as a stdio upstream; ``ServerConnection.call_tool("echo")`` one call
at a time, the rounds alternating between the lean path (``mcp_hub/upstream/
lean_call.py``) and the SDK's path (the lean path switched off for the round).
Reported per path: the hub process's CPU per call (the hop's own work, nothing of
the upstream's) and the p50 of a call. Nothing but the hop is measured: no
downstream transport, no pipeline. Loopback pipes only, bounded by ``--calls``.
With ``--upstream http`` the echo fixture runs as a Streamable HTTP upstream on
loopback instead, answering each request as one ``application/json`` document
(``ECHO_JSON_RESPONSE=1``): the path every answer of such an upstream takes
through the hub's HTTP client and its response hooks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import lean_call
from tests.fixtures_upstream import ROOT, echo_block, free_port, running, wait_port

PATHS = ("lean", "sdk")


async def _round(conn: Any, calls: int) -> tuple[float, float]:
    """CPU µs per call and p50 µs of ``calls`` calls, one at a time."""
    latencies = []
    cpu = time.process_time()
    for _ in range(calls):
        started = time.perf_counter()
        await conn.call_tool("echo", {"text": "hello"}, CallContext())
        latencies.append(time.perf_counter() - started)
    cpu = time.process_time() - cpu
    return cpu / calls * 1e6, statistics.median(latencies) * 1e6


async def run(calls: int, rounds: int, upstream: str) -> dict[str, list[tuple[float, float]]]:
    if upstream == "stdio":
        return await _rounds(echo_block(), calls, rounds)
    port = free_port()
    env = {**os.environ, "ECHO_JSON_RESPONSE": "1"}
    proc = await anyio.open_process([sys.executable, "-m", "tests.fixtures.echo_server",
                                     "--transport", "http", "--port", str(port)],
                                    cwd=ROOT, env=env, stderr=subprocess.DEVNULL)
    try:
        await wait_port(port, proc)
        block = f'[servers.echo]\nurl = "http://127.0.0.1:{port}/mcp"\ntransport = "http"\n'
        return await _rounds(block, calls, rounds)
    finally:
        proc.kill()
        await proc.wait()


async def _rounds(block: str, calls: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    real = lean_call.lean_dispatcher
    results: dict[str, list[tuple[float, float]]] = {p: [] for p in PATHS}
    async with running(block) as (manager, _):
        conn = manager.connection("echo")
        assert conn is not None
        await _round(conn, 200)  # warm-up
        for r in range(rounds):
            for path in PATHS if r % 2 == 0 else PATHS[::-1]:
                lean_call.lean_dispatcher = real if path == "lean" else (  # type: ignore[assignment]
                    lambda session: None)
                try:
                    results[path].append(await _round(conn, calls))
                finally:
                    lean_call.lean_dispatcher = real  # type: ignore[assignment]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per round and path")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--upstream", choices=("stdio", "http"), default="stdio")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    results = anyio.run(run, args.calls, args.rounds, args.upstream)
    print(f"{time.strftime('%H:%M', time.gmtime())} UTC, load average {load:.1f} at start, "
          f"{args.upstream} upstream, "
          f"{args.rounds} rounds × {args.calls} calls per path")
    print("| path | hub CPU µs/call (median of rounds) | p50 µs (median of rounds) | rounds |")
    print("| --- | --- | --- | --- |")
    for path, rows in results.items():
        cpu = statistics.median(c for c, _ in rows)
        p50 = statistics.median(p for _, p in rows)
        each = ", ".join(f"{c:.0f}" for c, _ in rows)
        each_p50 = ", ".join(f"{p:.0f}" for _, p in rows)
        print(f"| {path} | {cpu:.0f} ({each}) | {p50:.0f} ({each_p50}) | {len(rows)} |")
    lean = statistics.median(c for c, _ in results["lean"])
    sdk = statistics.median(c for c, _ in results["sdk"])
    print(f"\nlean ÷ sdk CPU per call: {lean / sdk:.2f} ({lean - sdk:+.0f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
