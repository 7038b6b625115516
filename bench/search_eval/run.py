"""Evaluate tool_search ranking on real servers' tools and labelled queries.

    .venv/bin/python -m bench.search_eval.run [--misses] [--split all|tune|holdout]

Prints recall@1, recall@5 and MRR for mcp-hub's ranking and, in the same run,
for plain BM25 (k1 1.5, b 0.75) over tool name + description as the baseline;
then the definition tokens of the whole catalog with and without bridging.
A query counts as found at k when any of its correct tools is in the top k.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp_hub.registry.naming import exposed_name
from mcp_hub.search.tool_search import (
    DEFAULT_WEIGHTS,
    RankingWeights,
    SearchIndex,
    ToolDoc,
    ToolSearchSettings,
    estimate_tokens,
    plan_exposure,
)

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog.json"
QUERIES = HERE / "queries.jsonl"
RANK_DEPTH = 50

# A search function: (query, limit) -> labels "server/raw_name", best first.
Searcher = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Query:
    text: str
    expected: frozenset[str]
    split: str


@dataclass(frozen=True)
class Scores:
    n: int
    recall_at_1: float
    recall_at_5: float
    mrr: float

    def row(self, label: str) -> str:
        return f"{label:<28} {self.n:>4} {self.recall_at_1:>9.3f} {self.recall_at_5:>9.3f} {self.mrr:>7.3f}"


def load_catalog(path: Path = CATALOG) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads(path.read_text())
    return data


def load_queries(path: Path = QUERIES) -> list[Query]:
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out.append(Query(row["query"], frozenset(row["expected"]), row.get("split", "tune")))
    return out


def hub_definitions(catalog: dict[str, list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The catalog as the hub exposes it: ``<server>_<tool>`` names; label per exposed name."""
    defs: list[dict[str, Any]] = []
    labels: dict[str, str] = {}
    for server in sorted(catalog):
        for tool in catalog[server]:
            name = exposed_name(server, tool["name"])
            defs.append({**tool, "name": name})
            labels[name] = f"{server}/{tool['name']}"
    return defs, labels


def hub_docs(catalog: dict[str, list[dict[str, Any]]]) -> tuple[list[ToolDoc], dict[str, str]]:
    defs, labels = hub_definitions(catalog)
    docs = [ToolDoc.from_definition(d, labels[d["name"]].split("/", 1)[0]) for d in defs]
    return docs, labels


def hub_searcher(index: SearchIndex, labels: dict[str, str]) -> Searcher:
    return lambda q, k: [labels[m.name] for m in index.search(q, k)]


class PlainBM25:
    """The baseline: one field (name + description), lower-cased alphanumeric
    tokens, no stemming, stop words or synonyms; k1 1.5, b 0.75."""

    def __init__(self, docs: Sequence[tuple[str, str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.labels = [label for label, _ in docs]
        self.tfs = [Counter(self.tokens(text)) for _, text in docs]
        self.lengths = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lengths) / max(len(self.lengths), 1)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        self.k1, self.b = k1, b

    @staticmethod
    def tokens(text: str) -> list[str]:
        return re.findall(r"[a-z0-9]+", text.lower())

    def search(self, query: str, limit: int) -> list[str]:
        terms = set(self.tokens(query))
        scored = []
        for i, tf in enumerate(self.tfs):
            s = 0.0
            for t in terms:
                f = tf.get(t)
                if f:
                    norm = 1 - self.b + self.b * self.lengths[i] / self.avg
                    s += self.idf[t] * f * (self.k1 + 1) / (f + self.k1 * norm)
            if s > 0:
                scored.append((-s, i))
        scored.sort()
        return [self.labels[i] for _, i in scored[:limit]]


def baseline_searcher(catalog: dict[str, list[dict[str, Any]]]) -> Searcher:
    defs, labels = hub_definitions(catalog)
    bm25 = PlainBM25([(labels[d["name"]], f"{d['name']} {d.get('description') or ''}") for d in defs])
    return bm25.search


def evaluate(search: Searcher, queries: Sequence[Query]) -> Scores:
    r1 = r5 = rr = 0.0
    for q in queries:
        ranked = search(q.text, RANK_DEPTH)
        rank = next((i + 1 for i, label in enumerate(ranked) if label in q.expected), None)
        if rank is not None:
            r1 += rank <= 1
            r5 += rank <= 5
            rr += 1 / rank
    n = max(len(queries), 1)
    return Scores(len(queries), r1 / n, r5 / n, rr / n)


def misses(search: Searcher, queries: Sequence[Query], k: int = 5) -> list[tuple[Query, list[str]]]:
    out = []
    for q in queries:
        ranked = search(q.text, k)
        if not q.expected.intersection(ranked):
            out.append((q, ranked))
    return out


def token_report(catalog: dict[str, list[dict[str, Any]]]) -> tuple[int, int]:
    """(tokens of every definition, tokens of tools/list with bridging on)."""
    defs, labels = hub_definitions(catalog)
    origins = dict.fromkeys(labels, "upstream")
    servers = {name: label.split("/", 1)[0] for name, label in labels.items()}
    plan = plan_exposure(defs, origins, servers, ToolSearchSettings(mode="on"))
    return estimate_tokens(defs), estimate_tokens(plan.visible)


def select(queries: Sequence[Query], split: str) -> list[Query]:
    return [q for q in queries if split == "all" or q.split == split]


def main(argv: Sequence[str] | None = None, weights: RankingWeights = DEFAULT_WEIGHTS) -> int:
    parser = argparse.ArgumentParser(description="tool_search ranking evaluation")
    parser.add_argument("--misses", action="store_true", help="list queries missed at k=5")
    ns = parser.parse_args(argv)

    catalog = load_catalog()
    queries = load_queries()
    docs, labels = hub_docs(catalog)
    ours = hub_searcher(SearchIndex.build(docs, weights), labels)
    base = baseline_searcher(catalog)
    n_tools = sum(len(v) for v in catalog.values())
    print(
        f"catalog: {len(catalog)} servers, {n_tools} tools; queries: {len(queries)} "
        f"({len(select(queries, 'tune'))} tune, {len(select(queries, 'holdout'))} held out)"
    )
    print()
    print(f"{'ranking / split':<28} {'n':>4} {'recall@1':>9} {'recall@5':>9} {'MRR':>7}")
    for split in ("all", "holdout", "tune"):
        qs = select(queries, split)
        print(evaluate(ours, qs).row(f"mcp-hub      {split}"))
        print(evaluate(base, qs).row(f"plain BM25   {split}"))
    full, bridged = token_report(catalog)
    print()
    print(
        f"definition tokens: without bridging {full}, with bridging {bridged} ({100 * (1 - bridged / full):.1f}% fewer)"
    )
    if ns.misses:
        print("\nmissed at 5 by mcp-hub:")
        for q, got in misses(ours, queries):
            print(f"  [{q.split}] {q.text!r}: want {sorted(q.expected)}, got {got}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
