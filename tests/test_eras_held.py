"""The held-round store on its own: bounded in number, tokens good once, expiry tells the asker."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcp_hub.eras.held import LocalHeldRounds, Round, RoundsFull

pytestmark = pytest.mark.anyio


async def test_rounds_are_bounded_in_number_and_tokens_are_single_use() -> None:
    store = LocalHeldRounds(ttl=60, max_rounds=2)
    release = anyio.Event()

    async def wait(round_: Round) -> str:
        await release.wait()
        return "done"

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(store.run)
            first = store.start("tools/call", "a", wait)
            store.start("tools/call", "b", wait)
            with pytest.raises(RoundsFull):
                store.start("tools/call", "c", wait)
            token = store.hold(first)
            assert store.claim(token) is first
            assert store.claim(token) is None  # a replay finds nothing
            assert store.claim(token.split(".")[0] + ".99") is None
            release.set()
            await first.wait_for_stop()
            assert first.result == "done"
            tg.cancel_scope.cancel()


async def test_an_expired_round_fails_its_asks_then_cancels_its_call() -> None:
    store = LocalHeldRounds(ttl=0.2, max_rounds=5)
    seen: list[Any] = []

    async def asks(round_: Round) -> None:
        ask = round_.add_ask("elicitation/create", {"message": "?"})
        try:
            await ask.done.wait()
            seen.append(ask.error.message if ask.error else ask.response)
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(store.run)
            round_ = store.start("tools/call", "x", asks)
            await round_.wait_for_stop()
            assert [a.method for a in round_.unsent()] == ["elicitation/create"]
            token = store.hold(round_)
            while len(store):
                await round_.changed.wait()
            assert seen == ["the client did not answer within the hub's input-round TTL",
                            "cancelled"]
            assert store.claim(token) is None
            assert store.report()["expired"] == 1
            tg.cancel_scope.cancel()
