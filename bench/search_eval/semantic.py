"""Quality of tool_search ranking on the tuning set and the blind set, in one run.

    .venv/bin/python -m bench.search_eval.semantic [--cache-dir DIR] [--fit] [--misses]

For each set: plain BM25 (the baseline), mcp-hub's lexical ranking and its
hybrid ranking (lexical fused with MiniLM embeddings, the ``semantic`` extra:
the full transformer, as for catalogs up to ``transformer_max_tools``, and the
static vectors used above that), with recall@1, recall@5 and MRR, then the gap
between the sets.
``--fit`` chooses the fusion weight on the tuning set only (the blind set is
scored with the chosen weight, never used to choose); paste the result into
``FusionWeights`` in ``mcp_hub/search/fusion.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.search_eval.run import (
    Query,
    Scores,
    Searcher,
    baseline_searcher,
    evaluate,
    hub_docs,
    load_catalog,
    load_queries,
)
from mcp_hub.search.fusion import DEFAULT_FUSION, FusionWeights
from mcp_hub.search.ranking import SearchIndex
from mcp_hub.search.semantic import HybridIndex, SemanticEngine

HERE = Path(__file__).resolve().parent
SETS = {
    "tuning": (HERE / "catalog.json", HERE / "queries.jsonl"),
    "blind": (HERE / "blind" / "catalog.json", HERE / "blind" / "queries.jsonl"),
}
FIT_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def searcher(index: SearchIndex | HybridIndex, labels: dict[str, str]) -> Searcher:
    return lambda q, k: [labels[m.name] for m in index.search(q, k)]


def load_set(
    name: str, engine: SemanticEngine, static: SemanticEngine | None = None
) -> tuple[list[Query], dict[str, Searcher], HybridIndex | None]:
    catalog_path, queries_path = SETS[name]
    catalog = load_catalog(catalog_path)
    docs, labels = hub_docs(catalog)
    lexical = SearchIndex.build(docs)
    hybrid = engine.index(lexical)
    rankers = {"plain BM25": baseline_searcher(catalog), "mcp-hub lexical": searcher(lexical, labels)}
    if isinstance(hybrid, HybridIndex):
        rankers["mcp-hub hybrid"] = searcher(hybrid, labels)
    if static is not None and isinstance(static_index := static.index(lexical), HybridIndex):
        rankers["hybrid, static"] = searcher(static_index, labels)  # as over transformer_max_tools
    return load_queries(queries_path), rankers, hybrid if isinstance(hybrid, HybridIndex) else None


def fit(engine: SemanticEngine, queries: list[Query], index: HybridIndex, labels_searcher: Searcher) -> FusionWeights:
    """The semantic weight with the best recall@5 + MRR on the tuning queries."""
    best, best_score = engine.fusion, -1.0
    for w in FIT_GRID:
        engine.fusion = replace(DEFAULT_FUSION, semantic=w)
        s = evaluate(labels_searcher, queries)
        print(f"  fit semantic={w}: r@1 {s.recall_at_1:.3f} r@5 {s.recall_at_5:.3f} MRR {s.mrr:.3f}")
        if s.recall_at_5 + s.mrr > best_score + 1e-9:
            best, best_score = engine.fusion, s.recall_at_5 + s.mrr
    engine.fusion = best
    return best


def print_kinds(queries: list[Query], rankers: dict[str, Searcher]) -> None:
    """Blind-set recall@5 per kind of query (paraphrase, keyword, task, product, ambiguous)."""
    kinds: dict[str, str] = {}
    for line in SETS["blind"][1].read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            kinds[row["query"]] = row.get("kind", "?")
    print("\nblind recall@5 by kind:")
    for kind in sorted(set(kinds.values())):
        subset = [q for q in queries if kinds.get(q.text) == kind]
        cells = "  ".join(f"{label} {evaluate(search, subset).recall_at_5:.3f}" for label, search in rankers.items())
        print(f"  {kind:<11} n={len(subset):<4} {cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="tool_search quality on the tuning and blind sets")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default: a temporary one)")
    parser.add_argument("--fit", action="store_true", help="fit the fusion weight on the tuning set first")
    parser.add_argument("--misses", action="store_true", help="list blind queries the hybrid ranking misses at 5")
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        engine = SemanticEngine("hybrid", cache_dir=ns.cache_dir or Path(tmp))
        static = SemanticEngine("hybrid", cache_dir=ns.cache_dir or Path(tmp), transformer_max_tools=0)
        results: dict[str, dict[str, Scores]] = {}
        loaded = {name: load_set(name, engine, static) for name in SETS}
        if engine.reason:
            print(f"hybrid ranking unavailable: {engine.reason}")
        if ns.fit and "mcp-hub hybrid" in loaded["tuning"][1]:
            queries, rankers, _ = loaded["tuning"]
            print("fitting the fusion weight on the tuning set:")
            print(f"  chosen: {fit(engine, queries, loaded['tuning'][2], rankers['mcp-hub hybrid'])}")  # type: ignore[arg-type]
        print(f"\n{'set':<8} {'ranking':<17} {'n':>4} {'recall@1':>9} {'recall@5':>9} {'MRR':>7}")
        for name, (queries, rankers, _) in loaded.items():
            results[name] = {label: evaluate(search, queries) for label, search in rankers.items()}
            for label, s in results[name].items():
                print(f"{name:<8} {label:<17} {s.n:>4} {s.recall_at_1:>9.3f} {s.recall_at_5:>9.3f} {s.mrr:>7.3f}")
        print_kinds(loaded["blind"][0], loaded["blind"][1])
        print("\ngap (tuning minus blind):")
        for label in results["blind"]:
            t, b = results["tuning"][label], results["blind"][label]
            print(
                f"  {label:<17} recall@1 {t.recall_at_1 - b.recall_at_1:+.3f}  "
                f"recall@5 {t.recall_at_5 - b.recall_at_5:+.3f}  MRR {t.mrr - b.mrr:+.3f}"
            )
        if ns.misses and "mcp-hub hybrid" in loaded["blind"][1]:
            queries, rankers, _ = loaded["blind"]
            search = rankers["mcp-hub hybrid"]
            for q in queries:
                got = search(q.text, 5)
                if not q.expected.intersection(got):
                    print(f"  miss {q.text!r}: want {sorted(q.expected)}, got {got}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
