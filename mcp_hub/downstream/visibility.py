"""Per-caller views of what the hub pushes to clients without being asked.

Resource updates reach clients two ways: ``notifications/resources/updated`` to
handshake sessions that subscribed (filtered in :meth:`Hub._on_resource_updated`
by the caller the Hub remembers on the connection, :func:`remember_caller`), and ``subscriptions/listen`` streams of
2026-07-28 clients, fed by the hub's subscription bus. :class:`CallerBus` gives
each endpoint a view of that bus that drops updates of resources its caller may
not read. A listen request naming a hidden URI is acknowledged like one naming
a URI that does not exist, and like it, never fires.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mcp import types
from mcp.server.subscriptions import ListenHandler, SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged

from mcp_hub.access import AccessControl, Caller, caller_of_state, remember_caller
from mcp_hub.downstream.identity import caller_for

__all__ = ["CallerBus", "CallerListen", "ToolsDigest", "remember_caller"]


class ToolsDigest:
    """A digest of the tools one caller sees (names, descriptions, schemas).

    Two sessions of callers with different rules see different tool sets; when the
    registry or the config changes, a ``tools/list_changed`` goes only to those
    whose digest changed. Cached per (caller, registry generation, config).
    """

    def __init__(self, hub: Any) -> None:
        self._hub = hub
        self._cache: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        self._items: dict[int, tuple[types.Tool, int]] = {}

    def __call__(self, caller: Caller) -> int:
        hub = self._hub
        key = (caller, hub.registry.generation, id(hub.config))
        found = self._cache.get(key)
        if found is None:
            tools = hub.list_tools(caller)
            found = hash(frozenset(self._item(t) for t in tools))
            self._cache[key] = found
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
        value = hash((tool.name, tool.description,
                      json.dumps(tool.input_schema, sort_keys=True, default=str)))
        self._items[id(tool)] = (tool, value)
        return value

    def of_connection(self, connection: Any) -> int:
        return self(caller_of_state(getattr(connection, "state", None)))


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
                if now == seen[0]:
                    return  # nothing this caller sees changed
                seen[0] = now
            listener(event)

        return self._bus.subscribe(deliver)


class CallerListen:
    """The ``subscriptions/listen`` handler of one endpoint: one SDK handler per caller.

    Each caller's stream reads the bus through a :class:`CallerBus` of its own, so
    resource updates and tool list changes reach it only as far as it may see them.
    """

    def __init__(self, bus: SubscriptionBus, access: AccessControl, digest: ToolsDigest,
                 endpoint: Caller) -> None:
        self._bus, self._access, self._digest, self._endpoint = bus, access, digest, endpoint
        self._handlers: dict[Caller, ListenHandler] = {}

    async def __call__(self, ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
        who = caller_for(ctx, self._endpoint)
        handler = self._handlers.get(who)
        if handler is None:
            handler = ListenHandler(CallerBus(self._bus, self._access, who, self._digest))
            if len(self._handlers) < 256:  # bounded; past it, a caller gets a handler per stream
                self._handlers[who] = handler
        return await handler(ctx, params)
