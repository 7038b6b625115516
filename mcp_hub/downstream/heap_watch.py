"""The runners' hook for :mod:`mcp_hub.plumbing.settled_heap`: settle the heap once the catalog stops changing.

What makes long-lived objects in a hub is its catalog: upstream tools arriving
or changing (the registry's generation), prompts and resources (the session
tracker's counters), a reload (a new config object) and the lists prepared
from them (:mod:`.prepared_lists`). Their fingerprint is read a few times per
``[hub] heap_settle_seconds``; once it has not changed for that long after a
change, the heap is settled (one collection of what is not frozen yet, then
``gc.freeze``), and the collector's later full collections walk only what
arrived since. ``heap_settle_seconds = 0`` turns this off.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from mcp_hub.downstream.lists.prepared import prepared_lists
from mcp_hub.hub.interface import ServingHub
from mcp_hub.plumbing.settled_heap import SettleWatch

__all__ = ["catalog_fingerprint", "keep_heap_settled"]


def catalog_fingerprint(hub: ServingHub) -> Callable[[], Hashable]:
    """What changes when the hub's long-lived catalog objects may have: cheap to read."""
    lists = prepared_lists(hub)

    def fingerprint() -> Hashable:
        counters = getattr(hub.sessions, "generations", {})
        return (id(hub.config), hub.tools_generation, tuple(sorted(counters.items())),
                lists.preparations)

    return fingerprint


async def keep_heap_settled(hub: ServingHub) -> None:
    """Settle the heap after every change of the catalog, for as long as the hub runs."""
    quiet = float(getattr(hub.config.hub, "heap_settle_seconds", 0.0))
    if quiet <= 0:
        return
    await SettleWatch(catalog_fingerprint(hub), quiet).run()
