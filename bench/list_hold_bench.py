"""How long one list preparation after a change holds the hub's event loop (in process).

One command, from the repository root::

    .venv/bin/python bench/list_hold_bench.py                 # this tree, ~10 s
    .venv/bin/python bench/list_hold_bench.py --root ../other # another checkout of the hub

A hub (no upstream, no sockets) holding the 1,000 real tool definitions of
``bench/catalog_server.py``; ``--changes`` times a tool is added, each followed
by one ``tools/list`` preparation (``PreparedLists.result``) while another task
records how long it waits for the loop. Reported: the preparation's wall time,
the longest wait per preparation (p50, p90, max) and the full (oldest
generation) garbage collections of the run, which no slicing can split.
Without clients and sockets this separates what the hub's own code holds the
loop for from what the machine's load adds to ``bench/list_bench.py``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _full_collections(record: list[float]) -> None:
    started: dict[int, float] = {}

    def callback(phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            started[generation] = time.perf_counter()
        elif generation == 2 and generation in started:
            record.append(time.perf_counter() - started[generation])

    gc.callbacks.append(callback)


async def measure(changes: int) -> tuple[list[float], list[float]]:
    import anyio
    import anyio.lowlevel

    from mcp_hub.config.model import load_config
    from mcp_hub.downstream.lists.prepared import PreparedLists
    from mcp_hub.hub.access import EVERYONE
    from mcp_hub.hub.core import Hub
    from tests.hubtest import write_config
    from tests.test_list_fragments import _ok, real_tools, register

    config = load_config(write_config(Path(tempfile.mkdtemp()), '[tool_search]\nmode = "off"\n'))
    async with Hub(config, load_plugin_modules=False) as hub:
        for tool in real_tools(1000):
            register(hub, tool)
        lists = PreparedLists(hub)
        await lists.result("tools", EVERYONE, "2025-11-25")
        holds: list[float] = []
        preps: list[float] = []
        gaps: list[float] = []
        done = anyio.Event()

        async def probe() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await anyio.lowlevel.checkpoint()
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        async with anyio.create_task_group() as tg:
            tg.start_soon(probe)
            for i in range(changes):
                hub.registry.register(f"bench_new_{i}", "extra", {
                    "name": f"bench_new_{i}", "description": "x",
                    "parameters": {"type": "object", "properties": {}}},
                    _ok, is_async=True, description="x")
                await anyio.lowlevel.checkpoint()
                gaps.clear()
                started = time.perf_counter()
                await lists.result("tools", EVERYONE, "2025-11-25")
                preps.append(time.perf_counter() - started)
                await anyio.lowlevel.checkpoint()
                holds.append(max(gaps))
            done.set()
    return sorted(preps), sorted(holds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]),
                        help="the checkout of the hub to measure (its mcp_hub, tests and bench)")
    parser.add_argument("--changes", type=int, default=40)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(args.root).resolve()))
    import anyio

    full: list[float] = []
    _full_collections(full)
    preps, holds = anyio.run(measure, args.changes)
    ms = [f"{x * 1e3:.1f}" for x in full]
    print(f"{args.root}: preparation after a change p50 {statistics.median(preps) * 1e3:.2f} ms; "
          f"longest loop wait per preparation p50 {statistics.median(holds) * 1e3:.2f} ms, "
          f"p90 {holds[int(len(holds) * 0.9)] * 1e3:.2f} ms, max {holds[-1] * 1e3:.2f} ms "
          f"({args.changes} changes); full collections in the run (ms): {', '.join(ms) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
