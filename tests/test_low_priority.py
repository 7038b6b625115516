"""The low-priority background thread, and large list answers taking turns."""

from __future__ import annotations

import itertools
import os
import sys
import threading
from typing import Any

import anyio
import pytest

from mcp_hub.downstream.http.fastpath import HttpFastPath
from mcp_hub.downstream.lists.prepared import PreparedLists
from mcp_hub.plumbing.low_priority import LowPriorityThread

pytestmark = pytest.mark.anyio


async def test_results_exceptions_and_order() -> None:
    worker = LowPriorityThread("test-background")
    seen: list[int] = []

    def job(n: int) -> int:
        seen.append(n)
        return n * 2

    def fail() -> None:
        raise ValueError("bad input")

    with anyio.fail_after(10):
        assert await worker.run(job, 21) == 42
        with pytest.raises(ValueError, match="bad input"):
            await worker.run(fail)
        async with anyio.create_task_group() as tg:
            for n in range(5):
                tg.start_soon(worker.run, job, n)
    assert seen[0] == 21 and sorted(seen[1:]) == [0, 1, 2, 3, 4]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_the_thread_runs_at_nice_19_and_the_caller_does_not() -> None:
    worker = LowPriorityThread("test-nice")

    def own_nice() -> tuple[int, int]:
        return threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    with anyio.fail_after(10):
        tid, nice = await worker.run(own_nice)
    assert worker.niced and nice == 19
    assert tid != threading.get_native_id()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < 19


class _Turns:
    def __init__(self) -> None:
        self._turn = anyio.Lock()
        self._pace = anyio.Lock()

    _writing_turn = HttpFastPath._writing_turn
    turn = PreparedLists.turn


async def test_lists_arriving_together_start_one_per_loop_turn_in_order() -> None:
    turns: Any = _Turns()
    order: list[str] = []
    ticking = True

    async def lister(n: int) -> None:
        await turns.turn()
        order.append(f"list {n}")

    async def ticker() -> None:  # a call's steps: one per turn of the loop
        while ticking:
            order.append("tick")
            await anyio.lowlevel.checkpoint()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            async with anyio.create_task_group() as lists:
                for n in range(10):
                    lists.start_soon(lister, n)
            ticking = False
    started = [entry for entry in order if entry.startswith("list")]
    assert started == [f"list {n}" for n in range(10)]
    firsts = [order.index(entry) for entry in started]
    assert all(b - a >= 2 for a, b in itertools.pairwise(firsts))  # a tick between each two


async def test_large_answers_take_turns_and_a_stuck_one_holds_others_back_briefly() -> None:
    turns: Any = _Turns()
    order: list[str] = []

    async def write(name: str, hold: anyio.Event | None = None) -> None:
        async with turns._writing_turn():
            order.append(f"{name} in")
            if hold is not None:
                await hold.wait()
            else:
                await anyio.lowlevel.checkpoint()
            order.append(f"{name} out")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for name in ("a", "b", "c"):
                tg.start_soon(write, name)
    assert order == ["a in", "a out", "b in", "b out", "c in", "c out"]

    order.clear()
    stuck = anyio.Event()  # a client that does not read: its write never finishes by itself
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(write, "stuck", stuck)
            await anyio.wait_all_tasks_blocked()
            await write("next")  # written anyway, once the bounded wait is over
            assert order == ["stuck in", "next in", "next out"]
            stuck.set()
