"""Registry and pipeline micro-benchmarks.

Run: ``.venv/bin/python bench/registry_bench.py`` (``--quick`` for fewer repeats).

Prints, in one run:

* ``get_definitions`` over 1,000 and 10,000 tools, cold (cache miss: availability,
  overrides, normalisation, read-only copies) vs cached, and the ratio;
* a no-op async tool through ``handle_function_call`` (coercion, validation,
  dispatch, size cap) vs awaiting its handler directly: µs per call and ratio;
* bytes per ``ToolEntry`` (tracemalloc), alone and registered.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.plugins import HookManager
from mcp_hub.registry.tool_registry import ToolEntry, ToolRegistry


def tool_schema(i: int) -> dict[str, Any]:
    """A realistic upstream tool: a few typed properties, descriptions, annotations."""
    return {
        "name": f"tool_{i}",
        "description": f"Tool number {i}: does one useful thing with a path and options.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File or directory path."},
                "limit": {"type": "integer", "minimum": 1, "description": "Max results."},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"type": "string", "enum": ["fast", "full"]},
            },
            "required": ["path"],
        },
        "annotations": {"readOnlyHint": True},
    }


async def noop(args: dict[str, Any], **kwargs: Any) -> str:
    return "ok"


def populated(n: int) -> ToolRegistry:
    reg = ToolRegistry()
    with reg.batch():
        for i in range(n):
            reg.register(f"srv_tool_{i:05d}", f"mcp-srv{i % 10}", tool_schema(i), noop)
    return reg


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Best seconds of ``fn`` over ``repeat`` runs, garbage collector paused.

    The minimum (as ``timeit`` advises) filters out time the process spent
    descheduled on a busy machine, which only ever adds.
    """
    samples = []
    gc.collect()  # start from a settled heap, as the other timings do
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return min(samples)


def bench_definitions(n: int, repeat: int) -> None:
    reg = populated(n)
    keys = iter(range(10**9))
    cold = timed(lambda: reg.get_definitions(cache_key=next(keys)), repeat)
    reg.get_definitions(cache_key="warm")
    cached = timed(lambda: reg.get_definitions(cache_key="warm"), repeat * 10)
    print(f"get_definitions {n:>6,} tools   cold {cold * 1e3:9.3f} ms   "
          f"cached {cached * 1e3:8.3f} ms   ratio {cold / cached:6.0f}x")


async def bench_pipeline(calls: int) -> None:
    reg = ToolRegistry()
    reg.register("noop", "mcp-bench", tool_schema(0), noop)
    args = {"path": "/tmp", "limit": 5}
    hooks = HookManager()

    async def loop_direct() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await noop(args)
        return (time.perf_counter() - start) / calls

    async def loop_pipeline() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            await handle_function_call("noop", args, registry=reg, hooks=hooks)
        return (time.perf_counter() - start) / calls

    await loop_pipeline()  # warm: validator compiled
    gc.collect()
    gc.disable()
    try:
        direct = min([await loop_direct() for _ in range(5)])
        piped = min([await loop_pipeline() for _ in range(5)])
    finally:
        gc.enable()
    print(f"no-op async tool  direct {direct * 1e6:7.2f} µs   "
          f"handle_function_call {piped * 1e6:7.2f} µs   "
          f"overhead {(piped - direct) * 1e6:7.2f} µs/call   ratio {piped / direct:6.0f}x")


def bench_memory(n: int) -> None:
    schema = tool_schema(0)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    entries = [
        ToolEntry(f"t{i:05d}", "mcp-srv", schema, noop, origin="upstream") for i in range(n)
    ]
    after = tracemalloc.take_snapshot()
    names_bytes = sum(sys.getsizeof(e.name) for e in entries) + sys.getsizeof(entries)
    alone = sum(s.size_diff for s in after.compare_to(before, "filename"))
    reg = ToolRegistry()
    before = tracemalloc.take_snapshot()
    with reg.batch():
        for i in range(n):
            reg.register(f"t{i:05d}", "mcp-srv", schema, noop)
    after = tracemalloc.take_snapshot()
    registered = sum(s.size_diff for s in after.compare_to(before, "filename"))
    tracemalloc.stop()
    print(f"ToolEntry        {(alone - names_bytes) / n:6.0f} bytes per entry "
          f"(object only; slots, schema shared)   "
          f"{registered / n:6.0f} bytes per registered tool (entry + name + registry slot)")
    del entries


def main() -> None:
    quick = "--quick" in sys.argv
    repeat = 3 if quick else 7
    print(f"python {sys.version.split()[0]}")
    for n in (1_000, 10_000):
        bench_definitions(n, repeat)
    anyio.run(bench_pipeline, 2_000 if quick else 20_000)
    bench_memory(10_000)


if __name__ == "__main__":
    main()
