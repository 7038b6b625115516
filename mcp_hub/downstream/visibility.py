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

from collections.abc import Callable

from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent

from mcp_hub.access import AccessControl, Caller, remember_caller

__all__ = ["CallerBus", "remember_caller"]


class CallerBus:
    """A subscription bus view that delivers only what one caller may see."""

    def __init__(self, bus: SubscriptionBus, access: AccessControl, caller: Caller) -> None:
        self._bus = bus
        self._access = access
        self._caller = caller

    async def publish(self, event: ServerEvent) -> None:
        await self._bus.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        access, caller = self._access, self._caller

        def deliver(event: ServerEvent) -> None:
            if isinstance(event, ResourceUpdated) and not access.may_read(caller, event.uri):
                return
            listener(event)

        return self._bus.subscribe(deliver)
