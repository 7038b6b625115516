"""Quality of tool_search ranking on the tuning set and the blind set, in one run.

    .venv/bin/python -m bench.search_eval.semantic [--cache-dir DIR] [--fit] [--misses]

Three sets: ``tuning`` (the original 180 queries), ``tuning-hard`` (90 more
queries over the same catalog, written in the blind set's kinds: paraphrases,
tasks, product questions, keywords, ambiguous; tuning data, written by the
people who tune the ranker) and ``blind`` (never used to choose anything).
For each set: plain BM25 (the baseline), mcp-hub's lexical ranking and its
hybrid ranking (lexical fused with MiniLM embeddings, the ``semantic`` extra:
the full transformer, as for catalogs up to ``transformer_max_tools``, and the
static vectors used above that), with recall@1, recall@5 and MRR, then the gap
between the sets. ``hybrid, grouped`` scores what ``tool_search`` returns: the
hybrid ranking with near-duplicates on other servers folded into a match's
``also``, a group counting as found when any of its tools is correct.
``--fit`` chooses the fusion weights (one for the transformer, one for the
static vectors) on the two tuning sets only, maximising the sum over both of
recall@5 + MRR (the blind set is scored with the chosen weights, never used to
choose); paste the result into ``FusionWeights`` in ``mcp_hub/search/fusion.py``.
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
from mcp_hub.search.fusion import FusionWeights
from mcp_hub.search.grouping import group_matches
from mcp_hub.search.ranking import SearchIndex
from mcp_hub.search.semantic import HybridIndex, SemanticEngine

HERE = Path(__file__).resolve().parent
SETS = {
    "tuning": (HERE / "catalog.json", HERE / "queries.jsonl"),
    "tuning-hard": (HERE / "catalog.json", HERE / "queries_hard.jsonl"),
    "blind": (HERE / "blind" / "catalog.json", HERE / "blind" / "queries.jsonl"),
}
GROUPED = ", grouped"
FIT_GRID = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
TUNING_SETS = ("tuning", "tuning-hard")
#: Which ranker each fitted weight serves: (ranker label, FusionWeights field).
FITTED = (("mcp-hub hybrid", "semantic_transformer"), ("hybrid, static", "semantic"))


def searcher(index: SearchIndex | HybridIndex, labels: dict[str, str]) -> Searcher:
    return lambda q, k: [labels[m.name] for m in index.search(q, k)]


def grouped_searcher(index: SearchIndex | HybridIndex, labels: dict[str, str]) -> Searcher:
    """What ``tool_search`` answers: each match with its near-duplicates folded into ``also``.

    A group comes back as its members' labels joined by ``|``; :func:`score`
    counts it as found when any member is a correct tool.
    """

    def search(query: str, k: int) -> list[str]:
        groups = group_matches(index.search(query, k * 3), k)
        return ["|".join(labels[n] for n in [g["name"], *(a["name"] for a in g.get("also", []))]) for g in groups]

    return search


def score(label: str, search: Searcher, queries: list[Query]) -> Scores:
    """:func:`evaluate`; for a grouped ranking a group is a hit when any of its members is."""
    if not label.endswith(GROUPED):
        return evaluate(search, queries)
    expected = {q.text: q.expected for q in queries}

    def first_correct(query: str, k: int) -> list[str]:
        return [next((m for m in g.split("|") if m in expected[query]), g) for g in search(query, k)]

    return evaluate(first_correct, queries)


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
        rankers["hybrid" + GROUPED] = grouped_searcher(hybrid, labels)
    if static is not None and isinstance(static_index := static.index(lexical), HybridIndex):
        rankers["hybrid, static"] = searcher(static_index, labels)  # as over transformer_max_tools
    return load_queries(queries_path), rankers, hybrid if isinstance(hybrid, HybridIndex) else None


def fit(engine: SemanticEngine, field: str, sets: list[tuple[list[Query], Searcher]]) -> FusionWeights:
    """The weight ``field`` with the best recall@5 + MRR summed over the tuning sets."""
    best, best_score = engine.fusion, -1.0
    for w in FIT_GRID:
        engine.fusion = replace(engine.fusion, **{field: w})
        scores = [evaluate(search, queries) for queries, search in sets]
        total = sum(sc.recall_at_5 + sc.mrr for sc in scores)
        cells = "  ".join(f"r@1 {sc.recall_at_1:.3f} r@5 {sc.recall_at_5:.3f} MRR {sc.mrr:.3f}" for sc in scores)
        print(f"  {field}={w}: {cells}  sum {total:.3f}")
        if total > best_score + 1e-9:
            best, best_score = engine.fusion, total
    engine.fusion = best
    return best


def print_kinds(name: str, queries: list[Query], rankers: dict[str, Searcher]) -> None:
    """Recall@5 per kind of query (paraphrase, keyword, task, product, ambiguous)."""
    kinds: dict[str, str] = {}
    for line in SETS[name][1].read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            kinds[row["query"]] = row.get("kind", "?")
    print(f"\n{name} recall@5 by kind:")
    for kind in sorted(set(kinds.values())):
        subset = [q for q in queries if kinds.get(q.text) == kind]
        cells = "  ".join(f"{lbl} {score(lbl, search, subset).recall_at_5:.3f}" for lbl, search in rankers.items())
        print(f"  {kind:<11} n={len(subset):<4} {cells}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="tool_search quality on the tuning and blind sets")
    parser.add_argument("--cache-dir", type=Path, default=None, help="embedding cache (default: a temporary one)")
    parser.add_argument("--fit", action="store_true", help="fit the fusion weights on the tuning sets first")
    parser.add_argument("--misses", action="store_true", help="list blind queries the hybrid ranking misses at 5")
    ns = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        engine = SemanticEngine("hybrid", cache_dir=ns.cache_dir or Path(tmp))
        static = SemanticEngine("hybrid", cache_dir=ns.cache_dir or Path(tmp), transformer_max_tools=0)
        results: dict[str, dict[str, Scores]] = {}
        loaded = {name: load_set(name, engine, static) for name in SETS}
        if engine.reason:
            print(f"hybrid ranking unavailable: {engine.reason}")
        if ns.fit:
            print("fitting the fusion weights on the tuning sets:")
            for label, field in FITTED:
                owner = engine if field == "semantic_transformer" else static
                sets = [(loaded[n][0], loaded[n][1][label]) for n in TUNING_SETS if label in loaded[n][1]]
                if sets:
                    print(f"  chosen: {fit(owner, field, sets)}")
        print(f"\n{'set':<12} {'ranking':<17} {'n':>4} {'recall@1':>9} {'recall@5':>9} {'MRR':>7}")
        for name, (queries, rankers, _) in loaded.items():
            results[name] = {label: score(label, search, queries) for label, search in rankers.items()}
            for label, s in results[name].items():
                print(f"{name:<12} {label:<17} {s.n:>4} {s.recall_at_1:>9.3f} {s.recall_at_5:>9.3f} {s.mrr:>7.3f}")
        for name in ("tuning-hard", "blind"):
            print_kinds(name, loaded[name][0], loaded[name][1])
        for tuning in TUNING_SETS:
            print(f"\ngap ({tuning} minus blind):")
            for label in results["blind"]:
                t, b = results[tuning][label], results["blind"][label]
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
