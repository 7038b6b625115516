"""Startup concurrency: N stdio upstreams all ready, against the slowest one alone.

Each upstream sleeps a random startup delay (seeded) and then serves. If the hub
connects to its upstreams concurrently, the time until all N are ready is close
to the time of the slowest one alone; the ratio of the two is the figure
(target ≤ 1.5). Run::

    .venv/bin/python bench/startup_bench.py [--servers 20] [--max-delay 2.0] [--runs 3]
        [--server tiny|echo]

``tiny`` (default) is a plain-Python MCP server whose start costs a bare
interpreter, so the figure measures the hub rather than 20 concurrent imports of
an MCP library on however many cores the machine has; ``echo`` uses the SDK-based
echo fixture.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp_hub.config.model import HubConfig, parse_config  # noqa: E402
from mcp_hub.registry.tool_registry import ToolRegistry  # noqa: E402
from mcp_hub.upstream import ServerState, UpstreamManager  # noqa: E402

PY = sys.executable


def _quote(value: str) -> str:
    return json.dumps(value)


def _block(name: str, delay: float, server: str) -> str:
    if server == "tiny":
        args = [str(ROOT / "tests" / "fixtures_upstream" / "tiny_server.py")]
        env = f"{{ TINY_STARTUP_DELAY = {_quote(f'{delay:.3f}')} }}"
    else:
        args = ["-m", "tests.fixtures.echo_server"]
        env = f"{{ ECHO_STARTUP_DELAY = {_quote(f'{delay:.3f}')} }}"
    return (f"[servers.{name}]\ncommand = {_quote(PY)}\nargs = {json.dumps(args)}\n"
            f"cwd = {_quote(str(ROOT))}\nenv = {env}\nconnect_timeout = 120\n"
            "keepalive_interval = 0\n")


async def _time_until_ready(config: HubConfig) -> float:
    registry = ToolRegistry()
    start = time.perf_counter()
    async with UpstreamManager(config, registry) as manager:
        await manager.wait_ready(300)
        elapsed = time.perf_counter() - start
        bad = [s for s in manager.statuses() if s.state is not ServerState.READY]
        if bad:
            raise SystemExit(f"not ready: {[(s.name, s.state.value, s.last_error) for s in bad]}")
        assert len(registry.toolsets()) == len(config.servers)
    return elapsed


async def main(servers: int, max_delay: float, runs: int, server: str, seed: int) -> None:
    rng = random.Random(seed)
    delays = [rng.uniform(0.1 * max_delay, max_delay) for _ in range(servers)]
    slowest = max(range(servers), key=lambda i: delays[i])
    all_config = parse_config("".join(_block(f"s{i:02d}", d, server)
                                      for i, d in enumerate(delays)))
    one_config = parse_config(_block("slowest", delays[slowest], server))

    await _time_until_ready(one_config)  # warm caches (interpreter, bytecode)
    alone, together = [], []
    for _ in range(runs):
        alone.append(await _time_until_ready(one_config))
        together.append(await _time_until_ready(all_config))
    a, t = statistics.median(alone), statistics.median(together)
    print(f"servers={servers} server={server} slowest startup delay={delays[slowest]:.2f} s "
          f"runs={runs}")
    print(f"slowest alone:      {a * 1000:8.0f} ms (median)")
    print(f"all {servers} ready:     {t * 1000:8.0f} ms (median)")
    print(f"ratio:              {t / a:8.2f}  (target <= 1.5)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--max-delay", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--server", choices=["tiny", "echo"], default="tiny")
    parser.add_argument("--seed", type=int, default=7)
    ns = parser.parse_args()
    anyio.run(main, ns.servers, ns.max_delay, ns.runs, ns.server, ns.seed)
