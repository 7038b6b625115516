"""Resource subscriptions on a 2026-07-28 upstream, which has no ``resources/subscribe``.

The hub watches a subscribed URI through the filter of the upstream's
``subscriptions/listen`` stream; the upstream's resource-updated events reach
the hub's subscribers (``notifications/resources/updated`` for a 2025 client).
An unsubscribed URI stops firing, and a URI the upstream does not honour is
refused with a clear error instead of silently never firing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated

from mcp_hub.config.model import parse_config
from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.sessions.listening import WatchedUris, confirm_watched
from tests.erastest import hub_client, modern_toml
from tests.fixtures_upstream import running
from tests.hubtest import write_config

pytestmark = pytest.mark.anyio

URI = "mod://info"


class Updates:
    """The ``notifications/resources/updated`` and tool list changes a client received."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.tools_changed = 0
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
        elif isinstance(message, types.ToolListChangedNotification):
            self.tools_changed += 1
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait(self, done: Any) -> None:
        while not done():
            await self._arrived.wait()


@pytest.mark.parametrize("transport", ["stdio", "http"])
# resources/subscribe is the 2025 client's own method (gone only from 2026-07-28 on).
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_2025_client_gets_updates_of_a_modern_upstreams_resource(
    tmp_path: Path, transport: str,
) -> None:
    config = write_config(tmp_path, modern_toml())
    updates = Updates()
    with anyio.fail_after(90):
        async with hub_client(transport, "legacy", config, tmp_path,
                              message_handler=updates) as client:
            caps = client.server_capabilities
            assert caps.resources is not None
            assert caps.resources.subscribe
            await client.subscribe_resource(URI)
            await client.call_tool("mod_touch", {"uri": URI})
            await updates.wait(lambda: URI in updates.uris)

            await client.unsubscribe_resource(URI)
            await client.call_tool("mod_touch", {"uri": URI})
            # The upstream's stream delivers in order: the touch before the tool change.
            await client.call_tool("mod_add_tool", {"name": f"after_{transport}"})
            await updates.wait(lambda: updates.tools_changed > 0)
            assert updates.uris == [URI]

            # Subscribed again: it fires again (the set is carried by a new stream).
            await client.subscribe_resource(URI)
            await client.call_tool("mod_touch", {"uri": URI})
            await updates.wait(lambda: len(updates.uris) == 2)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_client_listening_for_a_resource_gets_its_updates(
    tmp_path: Path, transport: str,
) -> None:
    # The hub watches the URI upstream for as long as the client's stream names it.
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(90):
        async with hub_client(transport, "auto", config, tmp_path) as client:
            async with client.listen(resource_subscriptions=[URI, "mod://unknown"]) as sub:
                assert set(sub.honored.resource_subscriptions or ()) >= {URI}
                await client.call_tool("mod_touch", {"uri": URI})
                async for event in sub:
                    assert event == ResourceUpdated(uri=URI)
                    break
            # A second stream after the first ended: watched again from scratch.
            async with client.listen(resource_subscriptions=[URI]) as sub:
                await client.call_tool("mod_touch", {"uri": URI})
                async for event in sub:
                    assert event == ResourceUpdated(uri=URI)
                    break


async def test_the_listen_stream_reopens_with_the_subscriptions_after_a_reconnect() -> None:
    seen: list[str] = []
    arrived = anyio.Event()

    async def on_updated(uri: str) -> None:
        seen.append(uri)
        arrived.set()

    with anyio.fail_after(90):
        async with running(modern_toml(), on_resource_updated=on_updated) as (manager, _):
            await manager.subscribe_resource(URI)
            conn = manager.connection("mod")
            assert conn is not None and conn.watched.honoured == {URI}
            first = conn.session
            # A changed server block restarts the connection: a new session, a new stream.
            await manager.apply_config(parse_config(f"[hub]\n{modern_toml()}timeout = 45\n"))
            conn = manager.connection("mod")
            assert conn is not None
            session = await conn.wait_session(30, first)
            assert session is not None and session is not first
            await conn.watched.wait_acknowledged(conn.watched.version)
            assert conn.watched.honoured == {URI}
            await conn.call_tool("touch", {"uri": URI}, CallContext())
            await arrived.wait()
            assert seen == [URI]


async def test_a_uri_the_upstream_does_not_honour_is_refused() -> None:
    watched = WatchedUris()
    version = watched.add("mod://other")
    watched.acknowledge(version, frozenset())
    with pytest.raises(MCPError, match="did not accept a subscription to 'mod://other'"):
        await confirm_watched(watched, "mod://other", version, wait_seconds=5, server="mod")
    assert watched.uris == set()

    async def stream_fails() -> None:
        watched.stream_failed()

    version = watched.add("mod://late")
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stream_fails)
            with pytest.raises(MCPError, match="could not open a listen stream"):
                await confirm_watched(watched, "mod://late", version, wait_seconds=5,
                                      server="mod")
    assert watched.uris == set()
