"""Units of per-user OAuth: the connect links and the bounded session pool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_hub.state import EmbeddedState
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.peruser.links import ConnectLinks
from mcp_hub.upstream.peruser.pool import PoolFull, UserSessions

pytestmark = pytest.mark.anyio


async def test_a_link_names_its_identity_and_opens_once() -> None:
    links, state = ConnectLinks(b"k" * 32), EmbeddedState()
    ticket, claims = links.issue("gh", "alice")
    got = await links.redeem(ticket, "gh", state)
    assert (got.server, got.identity, got.elicitation_id) == ("gh", "alice", claims.elicitation_id)
    with pytest.raises(OAuthError, match="already used"):
        await links.redeem(ticket, "gh", state)
    # Another process with the same key and the same store refuses it too.
    with pytest.raises(OAuthError, match="already used"):
        await ConnectLinks(b"k" * 32).redeem(ticket, "gh", state)


def test_a_link_is_refused_when_forged_expired_or_for_another_server() -> None:
    links = ConnectLinks(b"k" * 32)
    ticket, _ = links.issue("gh", "alice")
    body, _, mac = ticket.partition(".")
    other, _ = ConnectLinks(b"x" * 32).issue("gh", "alice")
    for bad in (f"{body}x.{mac}", other, "garbage", ""):
        with pytest.raises(OAuthError, match="not valid"):
            links.check(bad, "gh")
    with pytest.raises(OAuthError, match="another server"):
        links.check(ticket, "linear")
    expired = ConnectLinks(b"k" * 32, seconds=-1)
    old, _ = expired.issue("gh", "alice")
    with pytest.raises(OAuthError, match="expired"):
        links.check(old, "gh")


class FakeSession:
    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.closed = False


def _opener(opened: list[FakeSession]) -> Any:
    @asynccontextmanager
    async def open_(key: tuple[str, str], refused: Callable[[], None]
                    ) -> AsyncIterator[FakeSession]:
        session = FakeSession(key)
        opened.append(session)
        try:
            yield session
        finally:
            session.closed = True
    return open_


async def test_one_session_per_identity_bounded_and_idle_ones_evicted() -> None:
    opened: list[FakeSession] = []
    pool = UserSessions(_opener(opened), max_sessions=2, idle_seconds=0.2)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(pool.run)
            async with pool.use(("gh", "alice")) as a1:
                pass
            async with pool.use(("gh", "alice")) as a2:
                assert a2 is a1, "the same identity reuses its session"
            async with pool.use(("gh", "bob")) as b:
                assert b.session is not a1.session
                # At the bound with every session busy, a third identity is refused.
                async with pool.use(("gh", "alice")):
                    with pytest.raises(PoolFull):
                        async with pool.use(("gh", "carol")):
                            pass
            # Alice and Bob idle now: Carol takes the least recently used one's place.
            async with pool.use(("gh", "carol")):
                assert len(pool) == 2
            assert [s.key[1] for s in opened] == ["alice", "bob", "carol"]
            while len(pool) or not all(s.closed for s in opened):
                await anyio.sleep(0.05)  # the idle sweeper closes them all (bounded above)
            tg.cancel_scope.cancel()
