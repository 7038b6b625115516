"""``ttlMs``/``cacheScope``: set on the hub's own lists, honoured from 2026-07-28 upstreams.

Units for the rules (duck-typed connections), then real processes: the
2026-07-28-only fixture as an upstream whose list carries hints, and the SDK's
``Client`` negotiating 2026-07-28 with a hub over stdio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from mcp import types

from mcp_hub.config.model import load_config
from mcp_hub.hub.access import EVERYONE, Caller
from mcp_hub.hub.core import Hub
from mcp_hub.hub.list_freshness import list_hint
from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.list_hints import MIN_REFRESH_SECONDS, HintCollector, ListHint, due
from tests.erastest import hub_client, modern_toml
from tests.hubtest import echo_server_toml, write_config

pytestmark = pytest.mark.anyio


@dataclass
class FakeConn:
    pushes: bool
    hints: dict[str, ListHint] = field(default_factory=dict)
    session: object = object()

    @property
    def capabilities(self) -> Any:
        return SimpleNamespace(tools=SimpleNamespace(list_changed=self.pushes), prompts=None,
                               resources=None)

    def supports(self, feature: str) -> bool:
        return feature == "tools"

    @property
    def list_hints(self) -> dict[str, ListHint]:
        return self.hints


def fake_hub(*conns: FakeConn, ttl_ms: int = 60_000, gated: bool = False, ready: bool = True) -> Any:
    return SimpleNamespace(
        config=SimpleNamespace(hub=SimpleNamespace(list_ttl_ms=ttl_ms)),
        upstreams=SimpleNamespace(initial_done=ready, connections=lambda: list(conns)),
        registry=SimpleNamespace(definitions=SimpleNamespace(
            availability_key=lambda: (1, (True,) if gated else (), ()))))


def test_every_upstream_pushing_changes_gives_the_configured_ttl_and_public_scope() -> None:
    hub = fake_hub(FakeConn(pushes=True), FakeConn(pushes=True))
    assert list_hint(hub, "tools", EVERYONE) == (60_000, "public")
    assert list_hint(hub, "prompts", EVERYONE) == (60_000, "public")  # no upstream offers prompts


def test_an_upstream_whose_changes_the_hub_cannot_see_makes_the_list_immediately_stale() -> None:
    hub = fake_hub(FakeConn(pushes=True), FakeConn(pushes=False))
    assert list_hint(hub, "tools", EVERYONE) == (0, "public")


def test_an_upstream_ttl_bounds_the_hubs_and_its_private_scope_carries_over() -> None:
    hint = ListHint(5_000, "private", 0.0)
    hub = fake_hub(FakeConn(pushes=True), FakeConn(pushes=False, hints={"tools": hint}))
    assert list_hint(hub, "tools", EVERYONE) == (5_000, "private")


def test_identities_gates_startup_and_the_setting() -> None:
    pushing = FakeConn(pushes=True)
    alice = Caller(identity="alice", attributes=frozenset({"sub:alice"}))
    assert list_hint(fake_hub(pushing), "tools", alice) == (60_000, "private")
    assert list_hint(fake_hub(pushing, gated=True), "tools", EVERYONE) == (30_000, "public")
    assert list_hint(fake_hub(pushing, ready=False), "tools", EVERYONE) == (0, "public")
    assert list_hint(fake_hub(pushing, ttl_ms=0), "tools", EVERYONE) == (0, "public")
    down = FakeConn(pushes=False, session=None)  # a server that is down lists nothing
    assert list_hint(fake_hub(pushing, down), "tools", EVERYONE) == (60_000, "public")


def test_hints_are_collected_over_pages_and_due_after_their_ttl() -> None:
    hints: dict[str, ListHint] = {}
    collector = HintCollector(modern=True)
    collector.page(types.ListToolsResult(tools=[], ttl_ms=9_000, cache_scope="public"))
    collector.page(types.ListToolsResult(tools=[], ttl_ms=4_000, cache_scope="public"))
    anyio.run(_record, collector, hints)
    assert (hints["tools"].ttl_ms, hints["tools"].scope) == (4_000, "public")
    at = hints["tools"].listed_at
    assert due(hints, at + 3.9) == ([], pytest.approx(0.1))
    assert due(hints, at + 4.0)[0] == ["tools"]
    assert due({"tools": ListHint(10, "public", at)}, at + 0.5)[1] == pytest.approx(
        MIN_REFRESH_SECONDS - 0.5)  # never polled more often than the floor
    assert due({"tools": ListHint(0, "public", at)}, at + 100)[0] == []  # 0: not polled
    legacy = HintCollector(modern=False)  # a 2025 session's defaults are not hints
    legacy.page(types.ListToolsResult(tools=[]))
    anyio.run(_record, legacy, hints)
    assert "tools" not in hints


async def _record(collector: HintCollector, hints: dict[str, ListHint]) -> None:
    collector.record(hints, "tools")


@pytest.fixture
async def modern_hub(tmp_path: Path) -> AsyncIterator[Hub]:
    body = modern_toml() + 'env = { MODERN_LIST_TTL_MS = "1500", MODERN_LIST_SCOPE = "public" }\n'
    config = load_config(write_config(tmp_path, body))
    async with Hub(config, load_plugin_modules=False) as running:
        with anyio.fail_after(30):
            await running.wait_ready(25)
        yield running


async def test_the_hub_relists_a_modern_upstream_once_its_ttl_has_passed(modern_hub: Hub) -> None:
    conn = next(c for c in modern_hub.upstreams.connections() if c.name == "mod")
    hint = conn.list_hints["tools"]
    assert (hint.ttl_ms, hint.scope) == (1_500, "public")
    # It announces changes on subscriptions/listen (listChanged), so the hub's own ttl is
    # not bounded by the upstream's; the upstream's public scope leaves the hub's public.
    assert conn.capabilities.tools.list_changed
    ttl, scope = list_hint(modern_hub, "tools", EVERYONE)
    assert ttl > 0 and scope == "public"
    with anyio.fail_after(20):
        result = await modern_hub.call_tool("mod_add_tool", {"name": "late", "quiet": True},
                                             CallContext())
        assert not result.is_error
        # No list_changed was sent: only the re-list after ttlMs can find the new tool.
        while "mod_late" not in {t.name for t in modern_hub.list_tools()}:
            await anyio.sleep(0.05)
    assert conn.list_hints["tools"].listed_at > hint.listed_at


async def test_a_2026_client_gets_ttl_and_scope_on_the_hubs_lists(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub="list_ttl_ms = 20000\n")
    with anyio.fail_after(90):
        async with hub_client("stdio", "auto", config, tmp_path) as client:
            listed = await client.list_tools()
            assert "echo_echo" in {t.name for t in listed.tools}
            # The echo fixture advertises tools.listChanged: the hub sees every change.
            assert (listed.ttl_ms, listed.cache_scope) == (20_000, "public")
            prompts = await client.list_prompts()
            assert prompts.cache_scope == "public"
