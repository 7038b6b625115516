"""Check the blind evaluation set and print what it holds.

Every query's labels must name tools of the catalog; every captured server must
have its package and version recorded. The printout gives the counts quoted in
this folder's README: servers and tools, queries per kind, labels per query.

Run: ``.venv/bin/python -m bench.search_eval.blind.stats``
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KINDS = ("paraphrase", "keyword", "task", "product", "ambiguous")


@dataclass
class BlindSet:
    """The catalog, where each server came from, and the labelled queries."""

    catalog: dict[str, list[dict[str, Any]]]
    sources: dict[str, dict[str, str]]
    queries: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)

    @property
    def tool_ids(self) -> set[str]:
        return {f"{server}/{tool['name']}" for server, tools in self.catalog.items() for tool in tools}


def load(folder: Path = HERE) -> BlindSet:
    """Read the set and list every inconsistency in ``problems``."""
    catalog = json.loads((folder / "catalog.json").read_text())
    sources = json.loads((folder / "sources.json").read_text())
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines() if line.strip()]
    blind = BlindSet(catalog, sources, queries)
    ids = blind.tool_ids
    for server in catalog:
        if not sources.get(server, {}).get("version"):
            blind.problems.append(f"server {server!r} has no recorded package version")
    seen: set[str] = set()
    for number, query in enumerate(queries, 1):
        text = query.get("query", "")
        if not text or not query.get("expected"):
            blind.problems.append(f"query {number} has no text or no labels")
        if text.lower() in seen:
            blind.problems.append(f"query {number} repeats {text!r}")
        seen.add(text.lower())
        if query.get("kind") not in KINDS:
            blind.problems.append(f"query {number} has unknown kind {query.get('kind')!r}")
        blind.problems.extend(f"query {number} names unknown tool {t!r}" for t in query["expected"] if t not in ids)
    return blind


def summary(blind: BlindSet) -> list[str]:
    """Lines describing the set: per-server counts, query kinds, labels per query."""
    lines = [f"{'server':20} {'package':40} {'version':10} tools queries"]
    per_server: Counter[str] = Counter()
    for query in blind.queries:
        per_server.update({t.split("/", 1)[0] for t in query["expected"]})
    for server in sorted(blind.catalog):
        src = blind.sources.get(server, {})
        lines.append(
            f"{server:20} {src.get('package', '?'):40} {src.get('version', '?'):10}"
            f" {len(blind.catalog[server]):5d} {per_server[server]:7d}"
        )
    kinds = Counter(q["kind"] for q in blind.queries)
    labels = Counter(len(q["expected"]) for q in blind.queries)
    multi = sum(1 for q in blind.queries if len({t.split("/", 1)[0] for t in q["expected"]}) > 1)
    lines += [
        f"{len(blind.catalog)} servers, {len(blind.tool_ids)} tools, {len(blind.queries)} queries",
        "queries per kind: " + ", ".join(f"{k} {kinds[k]}" for k in KINDS),
        "labels per query: " + ", ".join(f"{n}: {labels[n]}" for n in sorted(labels)),
        f"queries answered by more than one server: {multi}",
    ]
    return lines


def main() -> None:
    blind = load()
    print("\n".join(summary(blind)))
    for problem in blind.problems:
        print(f"problem: {problem}", file=sys.stderr)
    sys.exit(1 if blind.problems else 0)


if __name__ == "__main__":
    main()
