"""The hub's task ids (mcp_hub.hub.tasks): they name their upstream, belong to one owner,
expire with the task's ttl and are bounded in number."""

from __future__ import annotations

import time

import pytest

from mcp_hub.hub.tasks import TaskBook


def test_an_id_names_its_server_and_answers_only_its_owner() -> None:
    book = TaskBook()
    hub_id = book.add("ev", "upstream-1", "alice\nsession-a", 60_000)
    assert hub_id.startswith("ev/") and "upstream-1" not in hub_id
    record = book.find(hub_id, "alice\nsession-a")
    assert record is not None and (record.server, record.upstream_id) == ("ev", "upstream-1")
    for stranger in ("alice\nsession-b", "bob\nsession-a", ""):
        assert book.find(hub_id, stranger) is None
    assert book.find("ev/upstream-1", "alice\nsession-a") is None
    assert list(book.owned("alice\nsession-a")) == [hub_id]
    assert book.owned("bob\nsession-a") == {}
    assert book.by_upstream("ev", "upstream-1") == (hub_id, record)


def test_ids_are_not_reused_for_the_same_upstream_task_name() -> None:
    book = TaskBook()
    first = book.add("a", "t", "o")
    second = book.add("b", "t", "o")
    assert first != second and first.startswith("a/") and second.startswith("b/")


def test_a_task_is_forgotten_after_its_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    book = TaskBook()
    now = time.monotonic()
    hub_id = book.add("ev", "t", "o", 1_000, listener="conn")
    monkeypatch.setattr(time, "monotonic", lambda: now + 2)
    assert book.find(hub_id, "o") is None
    assert book.listener(hub_id) is None and book.by_upstream("ev", "t") is None


def test_the_book_is_bounded_oldest_first() -> None:
    book = TaskBook(max_tasks=3)
    ids = [book.add("ev", f"t{i}", "o") for i in range(5)]
    assert len(book) == 3
    assert [book.find(i, "o") is not None for i in ids] == [False, False, True, True, True]
