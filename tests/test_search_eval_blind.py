"""The blind search evaluation set is complete and consistent with its catalog."""

from __future__ import annotations

import json
from pathlib import Path

from bench.search_eval.blind.stats import KINDS, load


def test_blind_set_labels_name_catalog_tools() -> None:
    blind = load()
    assert blind.problems == []


def test_blind_set_is_large_and_covers_every_server_and_kind() -> None:
    blind = load()
    assert len(blind.catalog) >= 30
    assert len(blind.tool_ids) >= 600
    assert len(blind.queries) >= 200
    labelled_servers = {t.split("/", 1)[0] for q in blind.queries for t in q["expected"]}
    assert labelled_servers == set(blind.catalog)
    assert {q["kind"] for q in blind.queries} == set(KINDS)


def test_load_reports_unknown_tools_and_repeats(tmp_path: Path) -> None:
    catalog = {"srv": [{"name": "a", "description": "", "inputSchema": {"type": "object"}}]}
    (tmp_path / "catalog.json").write_text(json.dumps(catalog))
    (tmp_path / "sources.json").write_text(json.dumps({"srv": {"package": "p", "version": "1"}}))
    rows = [
        {"query": "q", "expected": ["srv/a"], "split": "blind", "kind": "task"},
        {"query": "Q", "expected": ["srv/b"], "split": "blind", "kind": "guess"},
    ]
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    problems = load(tmp_path).problems
    assert any("unknown tool 'srv/b'" in p for p in problems)
    assert any("repeats" in p for p in problems)
    assert any("unknown kind 'guess'" in p for p in problems)
