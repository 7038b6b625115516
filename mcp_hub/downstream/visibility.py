"""Per-caller views of what the hub pushes to clients without being asked.

Resource updates reach clients two ways: ``notifications/resources/updated`` to
handshake sessions that subscribed (filtered in :meth:`UpstreamServing.resource_updated`
by the caller the Hub remembers on the connection, :func:`remember_caller`), and ``subscriptions/listen`` streams of
2026-07-28 clients, fed by the hub's subscription bus. :class:`CallerBus` gives
each endpoint a view of that bus that drops updates of resources its caller may
not read. A listen request naming a hidden URI is acknowledged like one naming
a URI that does not exist, and like it, never fires.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import anyio
from mcp import types
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged

from mcp_hub.downstream.identity import caller_for
from mcp_hub.downstream.lists.fragments import Slicer
from mcp_hub.errors import HubError
from mcp_hub.hub.access import AccessControl, Caller, caller_of_state, remember_caller
from mcp_hub.hub.interface import ServingHub

__all__ = ["CallerBus", "CallerListen", "ResourceWatch", "ToolsDigest", "remember_caller",
           "uses_server"]

#: Resource URIs one listen stream may have the hub watch upstream.
MAX_WATCHED_URIS = 64
logger = logging.getLogger("mcp_hub.downstream")


class ToolsDigest:
    """A digest of the tools one caller sees (names, titles, descriptions, schemas, annotations).

    Two sessions of callers with different rules see different tool sets; when the
    registry or the config changes, a ``tools/list_changed`` goes only to those
    whose digest changed. Cached per (caller, registry generation, config).
    """

    def __init__(self, hub: ServingHub) -> None:
        self._hub = hub
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._items: dict[int, tuple[types.Tool, int]] = {}

    def __call__(self, caller: Caller) -> int:
        hub = self._hub
        key = (caller, hub.tools_generation, id(hub.config))
        found = self._cache.get(key)
        if found is None:
            tools = hub.list_tools(caller)
            found = self._store(key, tools, [self._item(t) for t in tools])
        return found

    async def prepare(self, connection: Any) -> None:
        """Work out the digest of ``connection``'s caller in slices of the event loop, so that
        the comparisons after a change (``list_changed`` going out) find it cached."""
        hub = self._hub
        key = (caller_of_state(getattr(connection, "state", None)), hub.tools_generation,
               id(hub.config))
        if key in self._cache:
            return
        slicer = Slicer()
        tools = await hub.list_tools_sliced(key[0], slicer.checkpoint)
        items = []
        for i, tool in enumerate(tools):
            items.append(self._item(tool))
            if i % 64 == 63:
                await slicer.checkpoint()
        if key == (key[0], hub.tools_generation, id(hub.config)):  # unchanged meanwhile
            self._store(key, tools, items)

    def _store(self, key: tuple[Any, ...], tools: list[types.Tool], items: list[int]) -> int:
        found = self._cache[key] = hash(frozenset(items))
        if len(self._items) > 2 * len(tools) + 256:  # forget tools that were replaced
            self._items = {id(t): self._items[id(t)] for t in tools if id(t) in self._items}
        while len(self._cache) > 256:
            self._cache.popitem(last=False)
        return found

    def _item(self, tool: types.Tool) -> int:
        """One tool's part of the digest; the Hub keeps an unchanged tool's model, so an
        unchanged tool is hashed once, not once per registry generation."""
        hit = self._items.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        # Title and annotations too: a rewrite may change only those (mcp_hub/rewrite).
        annotations = tool.annotations.model_dump(mode="json") if tool.annotations else None
        value = hash((tool.name, tool.title, tool.description,
                      json.dumps((tool.input_schema, annotations), sort_keys=True, default=str)))
        self._items[id(tool)] = (tool, value)
        return value

    def of_connection(self, connection: Any) -> int:
        return self(caller_of_state(getattr(connection, "state", None)))


def uses_server(access: AccessControl) -> Callable[[Any, str], bool]:
    """``uses_server(connection, server)``: the connection's caller may use ``server``."""
    def check(connection: Any, server: str) -> bool:
        who = caller_of_state(getattr(connection, "state", None))
        return access.policy(who).server(server)
    return check


class CallerBus:
    """A subscription bus view that delivers only what one caller may see."""

    def __init__(self, bus: SubscriptionBus, access: AccessControl, caller: Caller,
                 digest: ToolsDigest | None = None) -> None:
        self._bus = bus
        self._access = access
        self._caller = caller
        self._digest = digest

    async def publish(self, event: ServerEvent) -> None:
        await self._bus.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        access, caller, digest = self._access, self._caller, self._digest
        seen = [digest(caller) if digest is not None else None]

        def deliver(event: ServerEvent) -> None:
            if isinstance(event, ResourceUpdated) and not access.may_read(caller, event.uri):
                return
            if isinstance(event, ToolsListChanged) and digest is not None:
                now = digest(caller)
                said: frozenset[str] = getattr(event, "servers", frozenset())  # announced
                if now == seen[0] and not any(access.policy(caller).server(s) for s in said):
                    return  # nothing this caller sees changed, nor was said to
                seen[0] = now
            listener(event)

        return self._bus.subscribe(deliver)


class ResourceWatch(Protocol):
    """What a listen stream needs of the hub to watch resources upstream."""

    async def subscribe(self, caller: Caller, uri: str, connection: Any) -> None: ...

    async def drop_subscriber(self, uri: str, connection: Any) -> None: ...


class _StreamWatcher:
    """One listen stream among a resource's subscribers: the hub subscribes upstream for
    it, and its updates reach it through the bus, so nothing is sent to it directly."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}

    async def send_resource_updated(self, uri: str) -> None:
        return None


class CallerListen:
    """The ``subscriptions/listen`` handler of one endpoint: one SDK handler per caller.

    Each caller's stream reads the bus through a :class:`CallerBus` of its own, so
    resource updates and tool list changes reach it only as far as it may see them.
    The resource URIs a stream names are watched upstream (``resources/subscribe``
    or the upstream's own listen filter) from before the stream is acknowledged
    until it ends; a URI the caller may not read, or that no upstream serves, is
    acknowledged and never fires.
    """

    def __init__(self, bus: SubscriptionBus, access: AccessControl, digest: ToolsDigest,
                 endpoint: Caller, watch: ResourceWatch | None = None) -> None:
        self._bus, self._access, self._digest, self._endpoint = bus, access, digest, endpoint
        self._watch = watch
        self._handlers: dict[Caller, ListenHandler] = {}

    async def __call__(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        who = caller_for(ctx, self._endpoint)
        handler = self._handlers.get(who)
        if handler is None:
            handler = ListenHandler(CallerBus(self._bus, self._access, who, self._digest))
            if len(self._handlers) < 256:  # bounded; past it, a caller gets a handler per stream
                self._handlers[who] = handler
        uris = (params.notifications.resource_subscriptions or [])[:MAX_WATCHED_URIS]
        if self._watch is None or not uris:
            return await handler(ctx, params)
        watcher = _StreamWatcher()
        watching = await self._subscribe(who, uris, watcher)
        try:
            return await handler(ctx, params)
        finally:
            with anyio.CancelScope(shield=True):
                for uri in watching:
                    await self._watch.drop_subscriber(uri, watcher)

    async def _subscribe(self, who: Caller, uris: list[str], watcher: _StreamWatcher
                         ) -> list[str]:
        assert self._watch is not None
        watching: list[str] = []
        for uri in dict.fromkeys(uris):
            try:
                await self._watch.subscribe(who, uri, watcher)
            except (MCPError, HubError) as exc:
                logger.debug("listen stream: not watching %r: %s", uri, exc)
                continue
            watching.append(uri)
        return watching
