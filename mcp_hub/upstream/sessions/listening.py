"""A 2026-07-28 upstream's ``subscriptions/listen`` stream: list changes and resource updates.

From 2026-07-28 on there is no ``resources/subscribe``: a client names the
resource URIs it watches in the filter of its ``subscriptions/listen`` stream.
The hub keeps one stream per upstream session. Its filter asks for every list
change and for the URIs the hub's own clients have subscribed to; when that set
changes, a new stream with the new filter is opened and acknowledged *before*
the old one is closed, so no update to a URI watched in both falls into a gap.

A stream that drops is re-opened after a pause, and every list is refreshed
then (a listen stream does not replay what was missed). So is every list once
the first stream of a session is acknowledged: the connection read its lists
before that stream was open, and a change in between would otherwise be lost.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from anyio.abc import TaskStatus
from mcp.client.session import ClientSession
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost, listen
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["LISTEN_RETRY_SECONDS", "WatchedUris", "confirm_watched", "follow_changes", "listens"]

Kind = Literal["tools", "prompts", "resources"]
#: Pause before re-opening a dropped ``subscriptions/listen`` stream.
LISTEN_RETRY_SECONDS = 1.0
_KINDS: dict[type[Any], Kind] = {ToolsListChanged: "tools", PromptsListChanged: "prompts"}
_ALL_KINDS: tuple[Kind, ...] = ("tools", "prompts", "resources")
logger = logging.getLogger("mcp_hub.upstream")


class WatchedUris:
    """The resource URIs one upstream connection is subscribed to, kept across reconnects.

    Each change bumps a version; the listen loop reports which version its open
    stream carries and which URIs the upstream honoured, so a subscribe can wait
    until the upstream really watches the URI.
    """

    def __init__(self) -> None:
        self.uris: set[str] = set()
        self.version = 0
        self.honoured: frozenset[str] = frozenset()
        self._acked = -1
        self._failures = 0
        self._changed = anyio.Event()
        self._progress = anyio.Event()

    def add(self, uri: str) -> int:
        self.uris.add(uri)
        return self._bump()

    def discard(self, uri: str) -> int:
        self.uris.discard(uri)
        return self._bump()

    def _bump(self) -> int:
        self.version += 1
        self._changed.set()
        self._changed = anyio.Event()
        return self.version

    async def wait_change(self, since: int) -> None:
        """Return once the set differs from version ``since``."""
        while self.version == since:
            await self._changed.wait()

    def acknowledge(self, version: int, honoured: frozenset[str]) -> None:
        """The upstream acknowledged a stream carrying ``version`` of the set."""
        self._acked = version
        self.honoured = honoured
        self._signal()

    def stream_failed(self) -> None:
        """Wake subscribers waiting for an acknowledgement that will not come now."""
        self._failures += 1
        self._signal()

    def _signal(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def wait_acknowledged(self, version: int) -> bool:
        """Wait for a stream with ``version`` or later; False if a stream failed first.

        An acknowledgement of an older version (a stream opened before the change)
        keeps the wait going.
        """
        failures = self._failures
        while self._acked < version:
            if self._failures != failures:
                return False
            await self._progress.wait()
        return True


def listens(session: ClientSession | None) -> bool:
    """True on a live 2026-07-28 session, whose subscriptions ride its listen stream."""
    return session is not None and session.protocol_version in MODERN_PROTOCOL_VERSIONS


async def confirm_watched(watched: WatchedUris, uri: str, version: int, *,
                          wait_seconds: float, server: str) -> None:
    """Wait until the upstream's listen stream carries ``uri``; refuse it if not honoured."""
    acked = False
    with anyio.move_on_after(wait_seconds):
        acked = await watched.wait_acknowledged(version)
    if acked and uri in watched.honoured:
        return
    watched.discard(uri)
    reason = ("did not accept a subscription to" if acked
              else "could not open a listen stream watching")
    raise MCPError(INTERNAL_ERROR, f"Server '{server}' {reason} {uri!r}")


async def follow_changes(
    session: ClientSession,
    refresh: Callable[[Kind], None],
    watched: WatchedUris,
) -> None:
    """Keep a listen stream open on a 2026-07-28 session; a no-op on a handshake session.

    The session also hands every event's frame to the connection's message handler,
    which forwards resource updates; the stream's own events only refresh lists.
    """
    if not listens(session):
        return

    async def deliver(event: ServerEvent) -> None:
        if not isinstance(event, ResourceUpdated):
            refresh(_KINDS.get(type(event), "resources"))

    async with anyio.create_task_group() as tg:
        current: anyio.CancelScope | None = None
        first = True
        while True:
            version = watched.version
            ended = anyio.Event()
            try:
                scope, honoured = await tg.start(_stream, session, sorted(watched.uris),
                                                 deliver, ended)
            except (MCPError, SubscriptionLost, ListenNotSupportedError, TimeoutError) as exc:
                logger.debug("upstream listen stream refused: %s", exc)
                watched.stream_failed()
                await _retry(refresh)
                continue
            if current is not None:
                current.cancel()
            current = scope
            watched.acknowledge(version, honoured)
            if first:  # what changed between the first list reads and this stream
                first = False
                for kind in _ALL_KINDS:
                    refresh(kind)
            if await _changed_or_ended(watched, version, ended):
                continue
            current = None
            watched.stream_failed()
            await _retry(refresh)


async def _retry(refresh: Callable[[Kind], None]) -> None:
    await anyio.sleep(LISTEN_RETRY_SECONDS)
    for kind in _ALL_KINDS:
        refresh(kind)


async def _changed_or_ended(watched: WatchedUris, version: int, ended: anyio.Event) -> bool:
    """Wait for the next change of the set (True) or the stream's end (False)."""
    changed = False
    async with anyio.create_task_group() as inner:
        async def on_change() -> None:
            nonlocal changed
            await watched.wait_change(version)
            changed = True
            inner.cancel_scope.cancel()

        async def on_end() -> None:
            await ended.wait()
            inner.cancel_scope.cancel()

        inner.start_soon(on_change)
        inner.start_soon(on_end)
    return changed and not ended.is_set()


async def _stream(
    session: ClientSession, uris: list[str], deliver: Callable[[ServerEvent], Awaitable[None]],
    ended: anyio.Event,
    *, task_status: TaskStatus[tuple[anyio.CancelScope, frozenset[str]]],
) -> None:
    """One listen stream: started once acknowledged; ``ended`` is set if it drops by itself."""
    acked = False
    with anyio.CancelScope() as scope:
        try:
            async with listen(session, tools_list_changed=True, prompts_list_changed=True,
                              resources_list_changed=True, resource_subscriptions=uris) as sub:
                task_status.started((scope, frozenset(sub.honored.resource_subscriptions or ())))
                acked = True
                async for event in sub:
                    await deliver(event)
        except (MCPError, SubscriptionLost) as exc:
            if not acked:
                raise
            logger.debug("upstream listen stream ended: %s", exc)
        ended.set()
