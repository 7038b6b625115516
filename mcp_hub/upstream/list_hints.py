"""A 2026-07-28 upstream's ``ttlMs``/``cacheScope`` on its lists, and honouring them.

The hub keeps a copy of every upstream's lists (its tools are registered, its
prompts and resources served from the copy). A 2026-07-28 upstream says with
each list how long it stays fresh (``ttlMs``) and whether it may be shared across
authorization contexts (``cacheScope``). The hub honours that:

* the hint of each list kind is recorded when the list is fetched (the shortest
  ``ttlMs`` and the narrowest scope over its pages);
* :func:`refresh_when_stale` re-lists a kind once its ``ttlMs`` has passed
  (never more often than every ``MIN_REFRESH_SECONDS``), so the copy is never
  kept longer than the upstream allowed; a change found then reaches clients as
  any other change does (``list_changed``);
* the hub's own lists carry hints derived from these (``mcp_hub.hub.list_freshness``).

A ``ttlMs`` of 0 ("immediately stale") is not polled: such an upstream's changes
reach the hub through ``subscriptions/listen`` only, and the hub says so to its own
clients by answering ``ttlMs: 0`` for the lists it contributes to unless it
advertises ``listChanged``. 2025 upstreams send no hints (the fields are not on
that wire); nothing is recorded for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import anyio

__all__ = ["MIN_REFRESH_SECONDS", "HintCollector", "ListHint", "refresh_when_stale"]

#: The shortest pause between two re-lists of one kind caused by ``ttlMs``.
MIN_REFRESH_SECONDS = 1.0
#: How long the refresh loop sleeps when no recorded hint asks for a refresh.
_IDLE_SECONDS = 5.0
Scope = Literal["public", "private"]


@dataclass(frozen=True, slots=True)
class ListHint:
    """One list kind's hint as the upstream gave it, and when (``anyio.current_time()``)."""

    ttl_ms: int
    scope: Scope
    listed_at: float


class HintCollector:
    """Collects the hint over the pages of one listing."""

    def __init__(self, modern: bool) -> None:
        self.modern = modern
        self.ttl_ms: int | None = None
        self.scope: Scope = "public"

    def page(self, page: Any) -> None:
        if not self.modern:
            return
        ttl = int(getattr(page, "ttl_ms", 0) or 0)
        self.ttl_ms = ttl if self.ttl_ms is None else min(self.ttl_ms, ttl)
        if getattr(page, "cache_scope", "private") != "public":
            self.scope = "private"

    def record(self, hints: dict[str, ListHint], kind: str) -> None:
        """Store the hint of ``kind`` (or forget it: a 2025 session sends none)."""
        if self.ttl_ms is None:
            hints.pop(kind, None)
            return
        hints[kind] = ListHint(max(self.ttl_ms, 0), self.scope, anyio.current_time())


def _refresh_kind(kind: str) -> Literal["tools", "prompts", "resources"]:
    return "tools" if kind == "tools" else "prompts" if kind == "prompts" else "resources"


def due(hints: Mapping[str, ListHint], now: float) -> tuple[list[str], float]:
    """(the kinds whose ``ttlMs`` has passed, seconds until the next one is due)."""
    kinds: list[str] = []
    wait = _IDLE_SECONDS
    for kind, hint in hints.items():
        if hint.ttl_ms <= 0:
            continue
        left = hint.listed_at + max(hint.ttl_ms / 1000, MIN_REFRESH_SECONDS) - now
        if left <= 0:
            kinds.append(kind)
            wait = min(wait, MIN_REFRESH_SECONDS)
        else:
            wait = min(wait, left)
    return kinds, wait


async def refresh_when_stale(hints: Callable[[], Mapping[str, ListHint]],
                             refresh: Callable[[Literal["tools", "prompts", "resources"]], None]
                             ) -> None:
    """Ask for a re-list of every kind whose ``ttlMs`` has passed; runs for one session."""
    while True:
        kinds, wait = due(dict(hints()), anyio.current_time())
        for kind in kinds:
            refresh(_refresh_kind(kind))
        await anyio.sleep(wait)
