"""The committed evaluation set: tool_search must keep finding the right tools."""

from __future__ import annotations

from bench.search_eval.run import (
    baseline_searcher,
    evaluate,
    hub_docs,
    hub_searcher,
    load_catalog,
    load_queries,
    token_report,
)
from mcp_hub.search.tool_search import SearchIndex


def test_recall_at_5_on_the_labelled_queries_stays_at_least_0_90_and_above_plain_bm25() -> None:
    catalog = load_catalog()
    queries = load_queries()
    docs, labels = hub_docs(catalog)
    ours = evaluate(hub_searcher(SearchIndex.build(docs), labels), queries)
    base = evaluate(baseline_searcher(catalog), queries)
    assert len(queries) >= 150
    assert ours.recall_at_5 >= 0.90
    assert ours.recall_at_5 > base.recall_at_5
    assert ours.mrr > base.mrr


def test_the_held_out_queries_also_reach_0_90_recall_at_5() -> None:
    docs, labels = hub_docs(load_catalog())
    held_out = [q for q in load_queries() if q.split == "holdout"]
    assert evaluate(hub_searcher(SearchIndex.build(docs), labels), held_out).recall_at_5 >= 0.90


def test_the_eval_catalog_is_real_and_large_enough() -> None:
    catalog = load_catalog()
    assert len(catalog) >= 8
    assert sum(len(tools) for tools in catalog.values()) >= 250


def test_bridging_the_whole_catalog_saves_at_least_85_percent_of_definition_tokens() -> None:
    full, bridged = token_report(load_catalog())
    assert bridged <= 0.15 * full
