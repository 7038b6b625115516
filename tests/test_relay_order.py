"""An upstream call hands on its answer only after the progress relayed before it."""

from __future__ import annotations

import anyio
import pytest

from mcp_hub.upstream import relay_order
from mcp_hub.upstream.relay_order import RelayBarrier

pytestmark = pytest.mark.anyio


async def test_the_answer_waits_for_relays_that_started_before_it() -> None:
    barrier = RelayBarrier()
    order: list[str] = []
    release = anyio.Event()

    async def relay(n: int) -> None:
        with barrier.relaying():
            await release.wait()
            order.append(f"progress {n}")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay, 1)
            tg.start_soon(relay, 2)
            await anyio.wait_all_tasks_blocked()

            async def answer() -> None:
                await barrier.drain()
                order.append("answer")

            tg.start_soon(answer)
            await anyio.wait_all_tasks_blocked()
            assert order == []
            release.set()
    assert order == ["progress 1", "progress 2", "answer"]


async def test_with_no_relay_running_the_answer_goes_at_once() -> None:
    with anyio.fail_after(1):
        await RelayBarrier().drain()


async def test_a_relay_that_never_finishes_holds_the_answer_only_for_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay_order, "RELAY_DRAIN_SECONDS", 0.05)
    barrier = RelayBarrier()
    stuck = anyio.Event()

    async def relay() -> None:
        with barrier.relaying():
            await stuck.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            await anyio.wait_all_tasks_blocked()
            await barrier.drain()
            tg.cancel_scope.cancel()
