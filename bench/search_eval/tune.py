"""Tune the ranking weights on the ``tune`` split; report the held-out split.

    .venv/bin/python -m bench.search_eval.tune [--rounds 3]

Coordinate ascent: each parameter of :class:`RankingWeights` in turn takes the
value from its grid that maximises recall@5 + MRR on the tune queries; a change
must gain at least ``--min-gain`` (about one query's worth), so the search does
not chase single queries. The held-out queries are
only scored, never used to choose. Paste the printed weights into
``DEFAULT_WEIGHTS`` in ``mcp_hub/search/ranking.py``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.search_eval.run import (
    Query,
    Scores,
    evaluate,
    hub_docs,
    hub_searcher,
    load_catalog,
    load_queries,
    select,
)
from mcp_hub.search.tool_search import DEFAULT_WEIGHTS, RankingWeights, SearchIndex, ToolDoc

GRID: dict[str, tuple[float, ...]] = {
    "name": (1.0, 2.0, 3.0, 4.0, 6.0, 8.0),
    "server": (0.0, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0),
    "summary": (0.0, 0.5, 1.0, 2.0, 3.0),
    "description": (0.25, 0.5, 1.0, 1.5, 2.0),
    "param_names": (0.0, 0.25, 0.5, 1.0),
    "param_descriptions": (0.0, 0.1, 0.3, 0.6),
    "b_name": (0.0, 0.25, 0.5, 0.75, 1.0),
    "b_description": (0.25, 0.5, 0.75, 0.9, 1.0),
    "b_params": (0.25, 0.5, 0.75, 1.0),
    "synonym": (0.0, 0.1, 0.2, 0.3, 0.4, 0.6),
    "name_cover": (0.0, 0.5, 1.0, 2.0, 3.0, 4.0),
}


def objective(s: Scores) -> float:
    return s.recall_at_5 + s.mrr


def score(docs: list[ToolDoc], labels: dict[str, str], w: RankingWeights, qs: list[Query]) -> Scores:
    return evaluate(hub_searcher(SearchIndex.build(docs, w), labels), qs)


def main() -> int:
    parser = argparse.ArgumentParser(description="tune tool_search ranking weights")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--min-gain",
        type=float,
        default=0.01,
        help="accept a change only if the objective gains this much (about one query's worth)",
    )
    ns = parser.parse_args()
    docs, labels = hub_docs(load_catalog())
    queries = load_queries()
    tune, holdout = select(queries, "tune"), select(queries, "holdout")

    best = DEFAULT_WEIGHTS
    best_score = objective(score(docs, labels, best, tune))
    print(f"start: tune objective {best_score:.4f}")
    for r in range(ns.rounds):
        changed = False
        for param, grid in GRID.items():
            for value in grid:
                if value == getattr(best, param):
                    continue
                cand = replace(best, **{param: value})
                s = objective(score(docs, labels, cand, tune))
                if s > best_score + ns.min_gain:
                    best, best_score, changed = cand, s, True
        print(f"round {r + 1}: tune objective {best_score:.4f}")
        if not changed:
            break
    print()
    for label, w in (("current defaults", DEFAULT_WEIGHTS), ("tuned", best)):
        t, h = score(docs, labels, w, tune), score(docs, labels, w, holdout)
        print(
            f"{label:<17} tune r@1 {t.recall_at_1:.3f} r@5 {t.recall_at_5:.3f} MRR {t.mrr:.3f} | "
            f"held out r@1 {h.recall_at_1:.3f} r@5 {h.recall_at_5:.3f} MRR {h.mrr:.3f}"
        )
    print()
    print("RankingWeights(" + ", ".join(f"{k}={v}" for k, v in asdict(best).items()) + ")")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
