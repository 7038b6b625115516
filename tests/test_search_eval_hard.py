"""The second tuning set (bench/search_eval/queries_hard.jsonl) is consistent with the tuning catalog."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from bench.search_eval.blind.stats import KINDS
from bench.search_eval.run import load_catalog

HERE = Path(__file__).resolve().parents[1] / "bench" / "search_eval"


def rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (HERE / name).read_text().splitlines() if line.strip()]


def test_hard_tuning_queries_label_catalog_tools_and_cover_every_kind() -> None:
    catalog = load_catalog(HERE / "catalog.json")
    tools = {f"{server}/{tool['name']}" for server, listed in catalog.items() for tool in listed}
    hard = rows("queries_hard.jsonl")
    assert len(hard) >= 80
    unknown = [(r["query"], t) for r in hard for t in r["expected"] if t not in tools]  # type: ignore[attr-defined]
    assert unknown == []
    assert {r["kind"] for r in hard} == set(KINDS)
    assert {r["split"] for r in hard} == {"hard"}


def test_hard_tuning_queries_repeat_neither_themselves_nor_the_first_tuning_set() -> None:
    hard = [str(r["query"]).lower() for r in rows("queries_hard.jsonl")]
    first = {str(r["query"]).lower() for r in rows("queries.jsonl")}
    assert [q for q, n in Counter(hard).items() if n > 1] == []
    assert [q for q in hard if q in first] == []
