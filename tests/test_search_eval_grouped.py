"""bench.search_eval.semantic scores tool_search's grouped answer: a group is found when any member is."""

from __future__ import annotations

from bench.search_eval.run import Query
from bench.search_eval.semantic import GROUPED, score


def test_a_group_counts_when_any_of_its_tools_is_correct() -> None:
    queries = [Query("q", frozenset({"srv-b/op"}), "hard"), Query("r", frozenset({"srv-z/op"}), "hard")]
    answers = {"q": ["srv-a/other", "srv-a/op|srv-b/op"], "r": ["srv-a/op|srv-b/op"]}

    def search(query: str, k: int) -> list[str]:
        return answers[query][:k]

    grouped = score("hybrid" + GROUPED, search, queries)
    assert (grouped.recall_at_1, grouped.recall_at_5, grouped.mrr) == (0.0, 0.5, 0.25)
    flat = score("mcp-hub hybrid", search, queries)  # an ungrouped ranking is matched label by label
    assert (flat.recall_at_5, flat.mrr) == (0.0, 0.0)
