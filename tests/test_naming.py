"""Exposed names: prefix, sanitising and the 64-character budget."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from mcp_hub.registry.naming import exposed_name, exposed_prompt_name, sanitize_name

VALID = re.compile(r"^[A-Za-z0-9_-]+$")


def test_prefix_and_separator_join_server_and_tool() -> None:
    assert exposed_name("github", "create_issue") == "github_create_issue"
    assert exposed_name("github", "create_issue", separator="__") == "github__create_issue"


def test_empty_prefix_exposes_the_raw_name() -> None:
    assert exposed_name("", "get_time") == "get_time"


def test_characters_outside_the_allowed_set_become_underscores() -> None:
    assert exposed_name("my.server", "tool/with spaces:é") == "my_server_tool_with_spaces__"
    assert sanitize_name("a-b_c9") == "a-b_c9"


def test_long_names_are_shortened_deterministically_with_a_hash_suffix() -> None:
    raw = "x" * 100
    name = exposed_name("server", raw)
    assert len(name) == 64
    assert VALID.match(name)
    assert re.search(r"_[0-9a-f]{8}$", name)
    assert exposed_name("server", raw) == name
    assert name == "server_" + "x" * 48 + "_" + name[-8:]


def test_distinct_long_names_with_a_shared_head_stay_distinct() -> None:
    a = exposed_name("s", "y" * 80 + "a")
    b = exposed_name("s", "y" * 80 + "b")
    assert a != b and len(a) == len(b) == 64


def test_names_that_sanitise_alike_but_are_long_get_different_hashes() -> None:
    assert exposed_name("s", "é" * 70) != exposed_name("s", "ü" * 70)


def test_an_empty_result_is_impossible() -> None:
    assert exposed_name("", "") == "_"
    assert exposed_name("", "x" * 10, max_length=4) != ""
    assert len(exposed_name("", "x" * 10, max_length=4)) == 4


def test_prompt_names_follow_the_same_rule() -> None:
    assert exposed_prompt_name("srv", "my prompt") == "srv_my_prompt"


@given(st.text(max_size=40), st.text(max_size=120), st.integers(min_value=1, max_value=128))
def test_exposed_names_are_always_valid_and_within_budget(
    prefix: str, raw: str, max_length: int
) -> None:
    name = exposed_name(prefix, raw, max_length=max_length)
    assert VALID.match(name)
    assert 1 <= len(name) <= max_length
    assert exposed_name(prefix, raw, max_length=max_length) == name


def test_a_name_that_starts_with_its_prefix_is_not_prefixed_twice() -> None:
    assert exposed_name("git", "git_add", dedupe=True) == "git_add"
    assert exposed_name("fetch", "fetch", dedupe=True) == "fetch"
    assert exposed_name("git", "gitlab_x", dedupe=True) == "git_gitlab_x"
    assert exposed_name("git", "git_", dedupe=True) == "git_git_"
    assert exposed_name("git", "git__add", separator="__", dedupe=True) == "git__add"
    assert exposed_name("git", "git_add", separator="__", dedupe=True) == "git__git_add"
    assert exposed_name("", "x_y", dedupe=True) == "x_y"
    assert exposed_prompt_name("srv", "srv_greet", dedupe=True) == "srv_greet"


def test_without_dedupe_every_name_is_prefixed() -> None:
    assert exposed_name("git", "git_add") == "git_git_add"
    assert exposed_name("fetch", "fetch") == "fetch_fetch"


def test_a_sibling_keeps_the_plain_name_so_two_tools_never_share_one() -> None:
    siblings = {"add", "git_add"}
    assert exposed_name("git", "add", dedupe=True, siblings=siblings) == "git_add"
    assert exposed_name("git", "git_add", dedupe=True, siblings=siblings) == "git_git_add"

