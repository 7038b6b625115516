"""What a full garbage collection costs a hub holding 1,000 real tools, unsettled and settled.

One command, from the repository root::

    .venv/bin/python bench/heap_bench.py            # ~20 s

In process, no sockets: a Hub whose start-up heap is frozen (as the HTTP runner
does), then the 1,000 real tool definitions of ``bench/catalog_server.py`` as
``Tool`` models (what an upstream's listing leaves), registered, and listed
once from prepared bytes. Reported, in CPU time of this thread (so the
machine's load does not inflate it): the unfrozen containers and the cost of
one full collection at that point (what the collector pays at every full
collection, at a moment its thresholds pick), the cost of one settle
(``SettledHeap.settle``: the same walk, once), and a full collection after it;
then the same after 20 changes (a tool added, the list prepared again), and the
frozen count across those changes.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cpu_ms(fn: Callable[[], Any]) -> float:
    started = time.thread_time()
    fn()
    return (time.thread_time() - started) * 1e3


def full_ms() -> float:
    """The cheapest of three full collections (CPU ms)."""
    return min(cpu_ms(gc.collect) for _ in range(3))


async def measure(changes: int) -> list[str]:
    import anyio.lowlevel

    from bench.catalog_server import real_tools
    from mcp_hub.config.model import load_config
    from mcp_hub.downstream.lists.prepared import PreparedLists
    from mcp_hub.hub.access import EVERYONE
    from mcp_hub.hub.core import Hub
    from mcp_hub.plumbing.settled_heap import SettledHeap
    from tests.hubtest import write_config
    from tests.test_list_fragments import _ok, register

    out: list[str] = []
    config = load_config(write_config(Path(tempfile.mkdtemp()), '[tool_search]\nmode = "off"\n'))
    heap = SettledHeap()
    async with Hub(config, load_plugin_modules=False) as hub:
        heap.reset()  # the start-up heap, frozen as the HTTP runner does
        tools = real_tools(1000)
        for tool in tools:
            register(hub, tool)
        lists = PreparedLists(hub)
        await lists.result("tools", EVERYONE, "2025-11-25")
        out.append(f"catalog arrived: {len(gc.get_objects())} unfrozen containers; "
                   f"a full collection {full_ms():.1f} ms CPU")
        settle = cpu_ms(heap.settle)
        out.append(f"settle (one collection, then freeze): {settle:.1f} ms CPU; then "
                   f"{len(gc.get_objects())} unfrozen, a full collection {full_ms():.2f} ms CPU, "
                   f"{gc.get_freeze_count()} frozen")
        frozen = [gc.get_freeze_count()]
        for i in range(changes):
            hub.registry.register(f"bench_new_{i}", "extra", {
                "name": f"bench_new_{i}", "description": "x",
                "parameters": {"type": "object", "properties": {}}}, _ok, is_async=True, description="x")
            await anyio.lowlevel.checkpoint()
            await lists.result("tools", EVERYONE, "2025-11-25")
        out.append(f"after {changes} changes, unsettled: {len(gc.get_objects())} unfrozen, "
                   f"a full collection {full_ms():.2f} ms CPU")
        heap.settle()
        frozen.append(gc.get_freeze_count())
        out.append(f"settled again: a full collection {full_ms():.2f} ms CPU; frozen "
                   f"{frozen[0]} -> {frozen[1]} (resets {heap.stats.resets})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args(argv)
    import anyio

    for line in anyio.run(measure, args.changes):
        print(line)
    gc.unfreeze()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
