"""Benchmark only: record the event-loop lag and the garbage collections of a process on uvloop.

``bench/list_bench.py`` puts this folder on the hub's ``PYTHONPATH`` with
``MCP_HUB_BENCH_LAG_FILE`` set. Every event loop made by ``uvloop.new_event_loop``
(the hub's, through anyio) then runs one extra task that sleeps 2 ms at a time
and appends "<unix time> <lag ms> <cpu ms>" to ``<file>.<pid>``: how much later
than asked the loop came back, i.e. how long something else held it, and how
much CPU the loop's thread used meanwhile (on a loaded machine the lag also
counts the time the process waited for a core; the CPU does not). Every garbage
collection of the oldest generation, and every younger one that took over a
millisecond, is appended as "<unix time> <generation> <ms> <hub|auto> <cpu ms>" to
``<file>.gc.<pid>`` ("hub": run by :mod:`mcp_hub.plumbing.settled_heap`): a collection
holds the loop for its whole length, and no slicing can split it. Nothing happens without the variable.
"""

from __future__ import annotations

import os

_PATH = os.environ.get("MCP_HUB_BENCH_LAG_FILE")
if _PATH:
    import asyncio
    import gc
    import sys
    import time
    from typing import Any

    import uvloop

    _TASKS: list[Any] = []
    _new_loop = uvloop.new_event_loop

    async def _probe(path: str) -> None:
        with open(f"{path}.{os.getpid()}", "a") as out:
            for count in range(10**9):
                started, cpu = time.perf_counter(), time.thread_time()
                await asyncio.sleep(0.002)
                lag = time.perf_counter() - started - 0.002
                held = time.thread_time() - cpu
                out.write(f"{time.time():.4f} {lag * 1e3:.3f} {held * 1e3:.3f}\n")
                if count % 50 == 49:  # a hub killed at the end loses at most 50 samples
                    out.flush()

    def _probed_loop() -> Any:
        loop = _new_loop()
        loop.call_soon(lambda: _TASKS.append(loop.create_task(_probe(str(_PATH)))))
        return loop

    uvloop.new_event_loop = _probed_loop

    _GC_OUT = open(f"{_PATH}.gc.{os.getpid()}", "a", buffering=1)  # noqa: SIM115 (lives with the process)
    _GC_STARTED = [0.0, 0.0]

    def _collections(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            _GC_STARTED[:] = time.perf_counter(), time.thread_time()
            return
        took = time.perf_counter() - _GC_STARTED[0]
        cpu = time.thread_time() - _GC_STARTED[1]
        if info["generation"] == 2 or took > 0.001:
            heap = getattr(sys.modules.get("mcp_hub.plumbing.settled_heap"), "_HEAP", None)
            by = "hub" if getattr(heap, "_ours", False) else "auto"  # a settle, or the collector's own
            _GC_OUT.write(f"{time.time():.4f} {info['generation']} {took * 1e3:.3f} {by} {cpu * 1e3:.3f}\n")

    gc.callbacks.append(_collections)
