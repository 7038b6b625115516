"""tool_search latency over a 10,000-tool catalog, and index build time.

    .venv/bin/python bench/search_bench.py [--tools 10000] [--repeat 3]

The catalog is the real one in ``bench/search_eval/catalog.json`` copied under
numbered server labels (``github-2``, ``github-3`` …) until it holds ``--tools``
tools; the queries are the labelled evaluation queries. Reported: the time to
build the index, the p50/p99 of ``SearchIndex.search`` (limit 5), and the
p50/p99 of a whole ``tool_search`` call through :class:`ToolSearchBridge`
(index cached for the generation, JSON result included).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio
from mcp.types import CallToolResult

from bench.search_eval.run import load_catalog, load_queries
from mcp_hub.registry.naming import exposed_name
from mcp_hub.search.tool_search import SearchIndex, ToolDoc, ToolSearchBridge, ToolSearchSettings


def synthetic_catalog(size: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``size`` tool definitions built from the real catalog, with their server labels."""
    real = load_catalog()
    defs: list[dict[str, Any]] = []
    servers: dict[str, str] = {}
    copy = 1
    while len(defs) < size:
        for server in sorted(real):
            label = server if copy == 1 else f"{server}-{copy}"
            for tool in real[server]:
                if len(defs) == size:
                    break
                name = exposed_name(label, tool["name"])
                defs.append({**tool, "name": name})
                servers[name] = label
        copy += 1
    return defs, servers


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description="tool_search latency benchmark")
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3, help="passes over the query set")
    ns = parser.parse_args()

    defs, servers = synthetic_catalog(ns.tools)
    queries = [q.text for q in load_queries()]

    started = time.perf_counter()
    docs = [ToolDoc.from_definition(d, servers[d["name"]]) for d in defs]
    index = SearchIndex.build(docs)
    build_ms = (time.perf_counter() - started) * 1000

    search_ms: list[float] = []
    for _ in range(ns.repeat):
        for q in queries:
            t0 = time.perf_counter()
            index.search(q, 5)
            search_ms.append((time.perf_counter() - t0) * 1000)

    bridge = ToolSearchBridge(ToolSearchSettings(mode="on"), lambda: (defs, servers, 1))

    async def unused_reenter(name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
        raise AssertionError("tool_search never re-enters")

    async def calls() -> list[float]:
        await bridge.handle("tool_search", {"query": "warm up"}, unused_reenter)
        out = []
        for _ in range(ns.repeat):
            for q in queries:
                t0 = time.perf_counter()
                await bridge.handle("tool_search", {"query": q}, unused_reenter)
                out.append((time.perf_counter() - t0) * 1000)
        return out

    call_ms = anyio.run(calls)

    print(f"catalog: {len(defs)} tools, {len(set(servers.values()))} servers; {len(queries)} queries x {ns.repeat}")
    print(f"index build:               {build_ms:8.1f} ms")
    print(
        f"SearchIndex.search:    p50 {statistics.median(search_ms):6.2f} ms   p99 {percentile(search_ms, 99):6.2f} ms"
    )
    print(f"tool_search call:      p50 {statistics.median(call_ms):6.2f} ms   p99 {percentile(call_ms, 99):6.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
