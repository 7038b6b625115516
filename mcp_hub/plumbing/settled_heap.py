"""Keep the garbage collector off the long-lived heap: freeze it again once the catalog settles.

A collection of the oldest generation walks every container the collector
tracks, and it holds the event loop for its whole length: no slicing can split
it. The hub freezes its start-up heap (``gc.freeze``), but a catalog arrives
later: a thousand tools from the upstreams are some 90,000 dicts, lists and
models (the upstreams' ``Tool`` models, the registry's definitions, the list
caches). Left to the collector, each full collection walked them all, 15–35 ms
on a quiet machine and over 100 ms on a busy one, at whatever moment the
thresholds picked: usually during a burst of re-lists, since that is when
objects are made.

:class:`SettledHeap` chooses the moment instead. :meth:`SettledHeap.settle`
runs one full collection of what is not frozen yet (the catalog that arrived,
minus its garbage) and freezes what survives, so every later collection walks
only what arrived after it. :class:`SettleWatch` calls it once a fingerprint
of the catalog (the registry's generation, the prompt and resource counters,
the config, the prepared lists; see :mod:`mcp_hub.downstream.heap_watch`) has
stayed the same for ``[hub] heap_settle_seconds`` after a change. Long-lived
objects made elsewhere (twenty sessions opening, an SDK-path list's caches) are
caught at the same polls: once the collector's oldest generation holds
``OLD_LIMIT`` objects that are not frozen, they are collected and frozen at
once (:meth:`SettledHeap.freeze_old`): a pause of one collection of them (a few
milliseconds), taken at a poll, after which no later collection walks them
again.

**Bounded memory.** A frozen object is still freed by reference counting the
moment it is no longer used (an old catalog's definitions, a closed session's
buffers); the collector only never looks at it. What leaks is a frozen object
that later becomes part of an unreachable *cycle*: a session or task alive at a
settle that ends afterwards, say. Each settle therefore compares the frozen
count with the count after the last full reset; once it has grown by more than
``growth`` (plus ``slack`` objects), the settle is a reset instead:
``gc.unfreeze``, one collection of the whole heap (which finds those cycles),
``gc.freeze``. Frozen garbage can thus never exceed about half the live heap
plus ``slack`` objects, however many reloads and ``list_changed`` cycles the hub
goes through. (The slack lets a first catalog of a few thousand tools arrive on
top of the start-up heap without a reset: a reset walks the whole heap.)

The collector's state is process-wide, so there is one :class:`SettledHeap` per
process (:func:`settled_heap`). Imports nothing of the project.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import anyio

__all__ = ["GROWTH", "OLD_LIMIT", "SLACK", "HeapStats", "SettleWatch", "SettledHeap", "settled_heap"]

logger = logging.getLogger(__name__)

#: A settle becomes a full reset once the frozen count exceeds its last reset's by this factor...
GROWTH = 1.5
#: ... plus this many objects (so that a small heap is not reset at every settle).
SLACK = 50_000
#: Unfrozen objects in the oldest generation from which a poll freezes them (:meth:`SettledHeap.freeze_old`).
OLD_LIMIT = 10_000


@dataclass
class HeapStats:
    """What the settles did so far (tests, logs and the benchmark read it)."""

    settles: int = 0
    resets: int = 0
    #: Freezes of a grown oldest generation between settles (:meth:`SettledHeap.freeze_old`).
    old_freezes: int = 0
    #: How long the last settle held the loop (seconds).
    last_pause: float = 0.0
    #: The longest settle so far (seconds).
    longest_pause: float = 0.0
    #: The frozen count right after the last reset (None: no reset yet).
    baseline: int | None = None


class SettledHeap:
    """Freezes what survives a collection, and resets the frozen set before it grows unbounded."""

    def __init__(self, *, growth: float = GROWTH, slack: int = SLACK, old_limit: int = OLD_LIMIT) -> None:
        self.growth = growth
        self.slack = slack
        self.old_limit = old_limit
        self.stats = HeapStats()
        #: True while a collection of this object's runs (the benchmark's probe reads it).
        self._ours = False
        self._middle_seen = -1

    def limit(self) -> int | None:
        """The frozen count above which the next settle is a reset (None: the next one is)."""
        baseline = self.stats.baseline
        return None if baseline is None else int(baseline * self.growth) + self.slack

    def reset(self) -> float:
        """Unfreeze everything, collect the whole heap, freeze what survives; the pause in seconds."""
        started = time.perf_counter()
        self._ours = True
        try:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
        finally:
            self._ours = False
        self.stats.baseline = gc.get_freeze_count()
        self.stats.resets += 1
        return self._took(started, "reset")

    def settle(self) -> float:
        """Collect and freeze what arrived since the last settle; a :meth:`reset` when due."""
        limit = self.limit()
        if limit is None or gc.get_freeze_count() > limit:
            return self.reset()
        started = time.perf_counter()
        self._ours = True
        try:
            gc.collect()  # frozen objects are not walked: this is what arrived since
            gc.freeze()
        finally:
            self._ours = False
        return self._took(started, "settle")

    def old_grown(self) -> bool:
        """Whether the oldest generation holds ``old_limit`` unfrozen objects.

        Objects reach it only in a collection of the middle or the oldest generation,
        so while none ran since the last look this costs two counters; otherwise a list
        of what is there (kept small by these freezes).
        """
        stats = gc.get_stats()
        seen = stats[1]["collections"] + stats[2]["collections"]
        if seen == self._middle_seen:
            return False
        self._middle_seen = seen
        return len(gc.get_objects(generation=2)) >= self.old_limit

    def freeze_old(self) -> bool:
        """Collect and freeze what is not frozen, unless the frozen count is over :meth:`limit`
        (then nothing: the next :meth:`settle` resets instead); True if it froze."""
        limit = self.limit()
        if limit is None or gc.get_freeze_count() > limit:
            return False
        started = time.perf_counter()
        self._ours = True
        try:
            gc.collect()
            gc.freeze()
        finally:
            self._ours = False
        self.stats.old_freezes += 1
        self._took(started, "old generation freeze", settle=False)
        return True

    def _took(self, started: float, what: str, *, settle: bool = True) -> float:
        pause = time.perf_counter() - started
        stats = self.stats
        stats.settles += settle
        stats.last_pause = pause
        stats.longest_pause = max(stats.longest_pause, pause)
        if logger.isEnabledFor(logging.DEBUG):  # the frozen count is a walk of the frozen set
            logger.debug("heap %s: %d objects frozen, %.1f ms", what, gc.get_freeze_count(), pause * 1e3)
        return pause


_HEAP = SettledHeap()


def settled_heap() -> SettledHeap:
    """The process's :class:`SettledHeap` (the collector is process-wide)."""
    return _HEAP


class SettleWatch:
    """Settles the heap once ``fingerprint()`` has stayed the same ``quiet`` seconds after a change.

    The start counts as a change, so the first settle comes ``quiet`` seconds
    after the catalog stopped arriving. A fingerprint that keeps changing (one
    ``list_changed`` after another) postpones the settle until it stops: a
    settle is one pause, better taken once the bursts are over.
    """

    def __init__(self, fingerprint: Callable[[], Hashable], quiet: float,
                 heap: SettledHeap | None = None) -> None:
        self.fingerprint = fingerprint
        self.quiet = quiet
        self.heap = heap if heap is not None else settled_heap()
        self._seen: Hashable = fingerprint()
        self._changed_at: float | None = time.monotonic()

    def poll(self, now: float) -> bool:
        """Look at the fingerprint at ``now`` (monotonic seconds); True if the heap was settled."""
        seen = self.fingerprint()
        if seen != self._seen:
            self._seen, self._changed_at = seen, now
        elif self._changed_at is not None and now - self._changed_at >= self.quiet:
            self._changed_at = None
            self.heap.settle()
            return True
        if self.heap.old_grown() and not self.heap.freeze_old() and self._changed_at is None:
            self._changed_at = now  # over the limit: a reset once things are quiet
        return False

    async def run(self) -> None:
        """Poll four times per ``quiet`` period (at most once every 50 ms), forever."""
        interval = max(self.quiet / 4, 0.05)
        while True:
            await anyio.sleep(interval)
            self.poll(time.monotonic())
