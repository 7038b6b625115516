"""The heap frozen again once the catalog settles, with a frozen set that stays bounded.

Units drive :class:`SettledHeap` and :class:`SettleWatch` directly (with an
explicit clock); the memory test replaces a catalog of real tool definitions
many times over, on a real in-process hub with its prepared lists, while
objects with reference cycles are alive at every settle and dropped after it
(what a closed session leaves), and checks that neither the frozen set nor the
collector's own generations grow.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from bench.catalog_server import real_tools
from mcp_hub.config.model import load_config
from mcp_hub.downstream.heap_watch import catalog_fingerprint, keep_heap_settled
from mcp_hub.downstream.lists.fragments import SWEEP_SLACK
from mcp_hub.downstream.lists.prepared import PreparedLists
from mcp_hub.hub.access import EVERYONE
from mcp_hub.hub.core import Hub
from mcp_hub.plumbing.settled_heap import SettledHeap, SettleWatch, settled_heap
from tests.hubtest import write_config
from tests.test_list_fragments import register

pytestmark = pytest.mark.anyio


class _Session:
    """Stands for what a session leaves behind: objects in a reference cycle."""

    def __init__(self) -> None:
        self.me = self
        self.buffers = [[i] * 8 for i in range(200)]


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    """The collector is process-wide: leave it as the next test expects (nothing frozen)."""
    yield
    gc.unfreeze()
    gc.collect()


def _unfrozen_count() -> int:
    return len(gc.get_objects())


def test_a_settle_collects_garbage_and_freezes_what_is_alive() -> None:
    heap = SettledHeap()
    heap.reset()
    garbage, alive = _Session(), _Session()
    dead = weakref.ref(garbage)
    del garbage
    before = gc.get_freeze_count()
    heap.settle()
    assert dead() is None  # collected, not frozen
    assert gc.get_freeze_count() >= before + len(alive.buffers)
    assert not any(o is alive for o in gc.get_objects())  # out of the collector's sight
    assert alive.buffers[3] == [3] * 8


def test_the_watch_settles_once_after_the_fingerprint_stays_quiet() -> None:
    heap = SettledHeap(old_limit=10**9)  # only the fingerprint counts here
    state = {"generation": 0}
    watch = SettleWatch(lambda: state["generation"], quiet=2.0, heap=heap)
    start = watch._changed_at
    assert start is not None
    assert not watch.poll(start + 1.0)
    state["generation"] = 1  # a change postpones the settle
    assert not watch.poll(start + 1.5)
    assert not watch.poll(start + 3.0)
    assert watch.poll(start + 3.6)
    assert heap.stats.settles == 1
    assert not watch.poll(start + 10.0)  # nothing changed since: no second settle
    for t in range(20):  # one change after another: no settle while they go on
        state["generation"] += 1
        assert not watch.poll(start + 11.0 + t)
    assert heap.stats.settles == 1
    assert watch.poll(start + 33.0)
    assert heap.stats.settles == 2


def test_a_grown_old_generation_is_frozen_between_settles_or_leads_to_a_reset() -> None:
    heap = SettledHeap(old_limit=1_000)
    heap.reset()
    watch = SettleWatch(lambda: 0, quiet=5.0, heap=heap)
    watch._changed_at = None  # settled already
    kept = [_Session() for _ in range(20)]  # some 4,000 containers ...
    gc.collect()  # ... in the oldest generation
    assert len(gc.get_objects(generation=2)) >= 1_000
    assert not watch.poll(100.0)
    assert heap.stats.old_freezes == 1 and heap.stats.settles == 1  # the reset only
    assert len(gc.get_objects(generation=2)) < 1_000
    assert not watch.poll(101.0)  # no collection since: the look costs two counters
    assert heap.stats.old_freezes == 1
    assert not any(o is kept[0] for o in gc.get_objects())
    heap.stats.baseline, heap.slack = 0, 0  # over the limit now: no freeze, a reset once quiet
    more = [_Session() for _ in range(20)]
    gc.collect()
    assert not watch.poll(200.0)
    assert heap.stats.old_freezes == 1 and any(o is more[0] for o in gc.get_objects())
    assert watch.poll(206.0)
    assert heap.stats.resets == 2


def _catalog(round_: int, tools: list[Any]) -> list[Any]:
    """The same real tools with fresh descriptions: new definitions, new nested objects."""
    return [t.model_copy(update={"description": f"{t.description} (v{round_})"}, deep=True)
            for t in tools]


async def test_frozen_and_tracked_objects_stay_bounded_across_many_catalog_changes(
        tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, '[tool_search]\nmode = "off"\n'))
    tools = real_tools(300)
    heap = SettledHeap(growth=1.25, slack=5_000, old_limit=10**9)  # one settle per round, no more
    async with Hub(config, load_plugin_modules=False) as hub:
        lists = PreparedLists(hub)
        heap.reset()
        frozen: list[int] = []
        unfrozen: list[int] = []
        leaked: list[weakref.ref[_Session]] = []
        for round_ in range(30):
            for tool in hub.registry.get_definitions(None):
                if tool["name"].startswith("cat"):
                    hub.registry.deregister(tool["name"])
            for tool in _catalog(round_, tools):
                register(hub, tool)
            with anyio.fail_after(30):
                answer = await lists.result("tools", EVERYONE, "2025-11-25")
            assert f"(v{round_})".encode() in answer
            sessions = [_Session() for _ in range(20)]  # alive at the settle ...
            heap.settle()
            leaked += [weakref.ref(s) for s in sessions]
            del sessions  # ... and cyclic garbage after it: frozen garbage until a reset
            frozen.append(gc.get_freeze_count())
            unfrozen.append(_unfrozen_count())
            # The JSON of old catalogs' entries goes too, not only the collector's view of it.
            assert lists.fragments.count("tools") <= 4 * (len(tools) + SWEEP_SLACK)
        limit = heap.limit()
        assert limit is not None
        assert max(frozen[5:]) <= limit + 25_000  # one round's arrivals above the limit at most
        assert max(frozen[10:]) <= 1.5 * frozen[4]
        assert heap.stats.resets >= 2  # the reset came, and took the frozen garbage with it
        assert max(unfrozen) < 5_000  # the collector's own generations stay small
        heap.reset()
        assert all(ref() is None for ref in leaked)


async def test_a_running_hub_settles_its_heap_after_a_catalog_change(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, '[tool_search]\nmode = "off"\n',
                                      hub="heap_settle_seconds = 0.05\n"))
    heap = settled_heap()
    async with Hub(config, load_plugin_modules=False) as hub:
        fingerprint = catalog_fingerprint(hub)
        first = fingerprint()
        async with anyio.create_task_group() as tg:
            tg.start_soon(keep_heap_settled, hub)
            for tool in real_tools(50):
                register(hub, tool)
            assert fingerprint() != first
            before = heap.stats.settles
            with anyio.fail_after(10):
                while heap.stats.settles == before:
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
    assert gc.get_freeze_count() > 0


async def test_no_watch_runs_with_heap_settle_seconds_zero(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, "", hub="heap_settle_seconds = 0\n"))
    async with Hub(config, load_plugin_modules=False) as hub:
        with anyio.fail_after(5):
            await keep_heap_settled(hub)  # returns at once


async def test_the_sweep_keeps_the_entries_of_every_version_still_listed(tmp_path: Path) -> None:
    """Three protocol versions listed after every change of half the catalog: old entries go,
    the ones in use stay (each change serialises only the changed tools, once per version)."""
    config = load_config(write_config(tmp_path, '[tool_search]\nmode = "off"\n'))
    versions = ("2024-11-05", "2025-06-18", "2025-11-25")
    tools = real_tools(300)
    async with Hub(config, load_plugin_modules=False) as hub:
        for tool in tools:
            register(hub, tool)
        lists = PreparedLists(hub)
        with anyio.fail_after(120):
            for round_ in range(12):
                changed = _catalog(round_, tools[:150])
                for tool in changed:
                    register(hub, tool)  # the same names, new definitions
                before = lists.fragments.serialised
                for version in versions:
                    answer = await lists.result("tools", EVERYONE, version)
                    assert f"(v{round_})".encode() in answer
                if round_:  # the first round serialises the whole catalog, per version
                    assert lists.fragments.serialised - before == len(versions) * len(changed)
                assert lists.fragments.count("tools") <= 4 * (3 * 300 + SWEEP_SLACK)
        assert lists.fragments.count("tools") < len(versions) * 300 * 3  # old versions went
