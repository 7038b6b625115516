"""Cost of hybrid tool_search over a large catalog: first build, warm restart, query latency.

    .venv/bin/python -m bench.search_eval.cost [--tools 10000] [--queries 200]

The catalog is the tuning and blind catalogs (about 1,000 real tools) repeated
with numbered server names and a numbered sentence in each description, so
every tool's text is different (no two tools share a cached embedding). Three
measurements, each in the same process and run:

* cold: an empty cache directory: load the model, distil the token vectors the
  catalog needs, embed every tool, build the lexical index;
* warm: a new engine on the same cache directory (what a restart does);
* search: ``tool_search`` ranking (lexical + query embedding + fusion) for the
  labelled queries, p50 and p95 in milliseconds; lexical alone alongside.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.search_eval.run import hub_docs, load_catalog, load_queries
from mcp_hub.search.ranking import SearchIndex, ToolDoc
from mcp_hub.search.semantic import SemanticEngine

HERE = Path(__file__).resolve().parent


def big_catalog(n_tools: int) -> list[ToolDoc]:
    base: list[ToolDoc] = []
    for path in (HERE / "catalog.json", HERE / "blind" / "catalog.json"):
        docs, _ = hub_docs(load_catalog(path))
        base.extend(docs)
    out: list[ToolDoc] = []
    copy = 0
    while len(out) < n_tools:
        for d in base[: n_tools - len(out)]:
            out.append(
                ToolDoc(
                    name=f"{d.name}_{copy}",
                    server=f"{d.server}-{copy}",
                    raw_name=d.raw_name,
                    description=f"{d.description} Workspace {copy}.",
                    params=d.params,
                    required=d.required,
                )
            )
        copy += 1
    return out


def timed_build(engine: SemanticEngine, docs: list[ToolDoc]) -> tuple[float, float, float, object]:
    """(lexical index build s, model load + embedding s, the latter's process CPU s, the hybrid index)."""
    start = time.perf_counter()
    lexical = SearchIndex.build(docs)
    mid, cpu = time.perf_counter(), time.process_time()
    index = engine.index(lexical)
    return mid - start, time.perf_counter() - mid, time.process_time() - cpu, index


def percentiles(samples: list[float]) -> str:
    qs = statistics.quantiles(samples, n=20)
    return f"p50 {statistics.median(samples):.2f} ms, p95 {qs[18]:.2f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hybrid tool_search cost")
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    ns = parser.parse_args(argv)
    docs = big_catalog(ns.tools)
    queries = [q.text for q in load_queries()] + [q.text for q in load_queries(HERE / "blind" / "queries.jsonl")]
    queries = queries[: ns.queries]
    with tempfile.TemporaryDirectory() as tmp:
        cold_engine = SemanticEngine("hybrid", cache_dir=Path(tmp))
        cold_lex, cold, cold_cpu, _ = timed_build(cold_engine, docs)
        if cold_engine.reason:
            print(f"hybrid unavailable: {cold_engine.reason}")
            return 1
        encoder = cold_engine.encoder()
        distilled = getattr(encoder, "distilled", 0)
        print(f"{len(docs)} tools; lexical index build {cold_lex:.1f} s")
        print(f"cold: model load + embedding {cold:.1f} s, CPU {cold_cpu:.1f} s ({distilled} word pieces distilled)")
        warm_engine = SemanticEngine("hybrid", cache_dir=Path(tmp))
        warm_lex, warm, warm_cpu, index = timed_build(warm_engine, docs)
        again = getattr(warm_engine.encoder(), "distilled", 0)
        print(
            f"warm restart: model load + embedding {warm:.2f} s, CPU {warm_cpu:.2f} s ({again} pieces distilled); "
            f"lexical index build {warm_lex:.1f} s"
        )
        lexical = SearchIndex.build(docs)
        for q in queries[:10]:  # first-seen query tokens are distilled once; not what p50 measures
            index.search(q, 5)  # type: ignore[attr-defined]
        hybrid_ms: list[float] = []
        lexical_ms: list[float] = []
        hybrid_cpu: list[float] = []
        lexical_cpu: list[float] = []
        for q in queries:
            c0, t0 = time.process_time(), time.perf_counter()
            lexical.search(q, 15)
            c1, t1 = time.process_time(), time.perf_counter()
            index.search(q, 15)  # type: ignore[attr-defined]
            c2, t2 = time.process_time(), time.perf_counter()
            lexical_ms.append((t1 - t0) * 1000)
            hybrid_ms.append((t2 - t1) * 1000)
            lexical_cpu.append((c1 - c0) * 1000)
            hybrid_cpu.append((c2 - c1) * 1000)
        print(f"search over {len(docs)} tools, {len(queries)} distinct queries (each embedded once, not cached):")
        print(f"  lexical: wall {percentiles(lexical_ms)}; CPU p50 {statistics.median(lexical_cpu):.2f} ms")
        print(f"  hybrid:  wall {percentiles(hybrid_ms)}; CPU p50 {statistics.median(hybrid_cpu):.2f} ms")
        print(f"  ratio hybrid/lexical p50: {statistics.median(hybrid_ms) / statistics.median(lexical_ms):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
