"""tool_search ranking: BM25F fields, name splitting, stemming, synonyms, exact names."""

from __future__ import annotations

from typing import Any

from mcp_hub.search.ranking import short_description
from mcp_hub.search.tool_search import IndexCache, SearchIndex, ToolDoc
from mcp_hub.search.vocabulary import name_tokens, tokenize


def doc(name: str, description: str = "", server: str = "srv", **schema: Any) -> ToolDoc:
    definition = {"name": f"{server}_{name}", "description": description, "inputSchema": schema}
    return ToolDoc.from_definition(definition, server)


def names(index: SearchIndex, query: str, limit: int = 5) -> list[str]:
    return [m.name for m in index.search(query, limit)]


def test_names_split_on_separators_and_camel_case() -> None:
    assert name_tokens("getHTTPResponse") == ["get", "http", "respons"]
    assert name_tokens("API-retrieve-a-page") == ["api", "retriev", "page"]
    assert name_tokens("fs.read_file:v2") == ["fs", "read", "file", "v"]


def test_prose_is_stemmed_and_stop_words_dropped() -> None:
    assert tokenize("Creating the branches") == ["creat", "branch"]


def test_a_tool_is_found_by_a_camel_case_part_of_its_name() -> None:
    index = SearchIndex.build([doc("listPullRequests", "List PRs."), doc("getWeather", "Forecast.")])
    assert names(index, "pull requests")[0] == "srv_listPullRequests"


def test_stemming_matches_other_forms_of_a_word() -> None:
    index = SearchIndex.build([doc("create_entities", "Creates entities"), doc("echo", "Echo text")])
    assert names(index, "creating an entity") == ["srv_create_entities"]


def test_an_exact_name_ranks_first_even_against_better_text_matches() -> None:
    index = SearchIndex.build(
        [
            doc("status", "Show repository status status status"),
            doc("git_status", "Working tree state"),
        ]
    )
    assert names(index, "git_status")[0] == "srv_git_status"
    assert names(index, "srv_git_status")[0] == "srv_git_status"


def test_synonyms_bridge_request_words_and_definition_words() -> None:
    index = SearchIndex.build([doc("delete_file", "Delete a file from disk"), doc("read_file", "Read a file")])
    assert names(index, "remove this file")[0] == "srv_delete_file"


def test_abbreviations_expand_to_the_words_they_stand_for() -> None:
    index = SearchIndex.build([doc("create_pull_request", "Open a pull request"), doc("create_issue", "Open an issue")])
    assert names(index, "open a PR")[0] == "srv_create_pull_request"


def test_the_server_label_is_searchable() -> None:
    index = SearchIndex.build(
        [doc("create_issue", "Create an issue", "github"), doc("create_issue", "Create an issue", "gitlab")]
    )
    assert names(index, "create an issue on gitlab")[0] == "gitlab_create_issue"


def test_parameter_names_and_descriptions_are_searched() -> None:
    index = SearchIndex.build(
        [
            doc("convert", "Convert a value", properties={"timezone": {"description": "IANA zone"}}),
            doc("echo", "Echo a value"),
        ]
    )
    assert names(index, "timezone") == ["srv_convert"]


def test_no_match_gives_an_empty_list() -> None:
    index = SearchIndex.build([doc("echo", "Echo text back")])
    assert index.search("kubernetes deployment", 5) == []


def test_matches_carry_server_short_description_and_required_params() -> None:
    long = "word " * 400
    index = SearchIndex.build(
        [doc("echo", "Echo. " + long, properties={"text": {"type": "string"}}, required=["text"])]
    )
    (match,) = index.search("echo", 5)
    assert match.server == "srv"
    assert match.required == ("text",)
    assert len(match.description) <= 500
    assert match.as_dict()["required"] == ["text"]


def test_short_description_cuts_at_a_word_boundary() -> None:
    cut = short_description("alpha beta gamma delta", limit=12)
    assert cut == "alpha beta…"


def test_ties_keep_the_catalog_order() -> None:
    index = SearchIndex.build([doc("a_tool", "same words"), doc("b_tool", "same words")])
    assert names(index, "same words") == ["srv_a_tool", "srv_b_tool"]


def test_limit_bounds_the_number_of_matches() -> None:
    index = SearchIndex.build([doc(f"tool{i}", "shared description") for i in range(10)])
    assert len(index.search("shared", 3)) == 3
    assert index.search("shared", 0) == []


def test_the_raw_name_is_the_exposed_name_without_the_server_prefix() -> None:
    assert doc("read_file", server="fs").raw_name == "read_file"
    assert ToolDoc.from_definition({"name": "other"}, "fs").raw_name == "other"


def test_index_cache_builds_once_per_key() -> None:
    cache = IndexCache(size=2)
    built: list[int] = []

    def build() -> SearchIndex:
        built.append(1)
        return SearchIndex.build([doc("echo")])

    first = cache.get(("gen", 1), build)
    assert cache.get(("gen", 1), build) is first
    cache.get(("gen", 2), build)
    cache.get(("gen", 3), build)
    cache.get(("gen", 1), build)
    assert len(built) == 4
