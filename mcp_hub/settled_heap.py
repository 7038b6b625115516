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
objects made elsewhere are caught by the collector itself: after one of its own
full collections that took ``ADOPT_PAUSE`` or more, what it found alive is
frozen at the next poll (:meth:`SettledHeap.adopt`).

**Bounded memory.** A frozen object is still freed by reference counting the
moment it is no longer used (an old catalog's definitions, a closed session's
buffers); the collector only never looks at it. What leaks is a frozen object
that later becomes part of an unreachable *cycle*: a session or task alive at a
settle that ends afterwards, say. Each settle therefore compares the frozen
count with the count after the last full reset; once it has grown by more than
``growth`` (plus ``slack`` objects), the settle is a reset instead:
``gc.unfreeze``, one collection of the whole heap (which finds those cycles),
``gc.freeze``. Frozen garbage can thus never exceed about a quarter of the live
heap, however many reloads and ``list_changed`` cycles the hub goes through.

The collector's state is process-wide, so there is one :class:`SettledHeap` per
process (:func:`settled_heap`). Imports nothing of the project.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import anyio

__all__ = ["ADOPT_PAUSE", "GROWTH", "SLACK", "HeapStats", "SettleWatch", "SettledHeap", "settled_heap"]

logger = logging.getLogger(__name__)

#: A settle becomes a full reset once the frozen count exceeds its last reset's by this factor...
GROWTH = 1.25
#: ... plus this many objects (so that a small heap is not reset at every settle).
SLACK = 20_000
#: A full collection the collector ran by itself that took this long walked a large unfrozen
#: heap: what it found alive is frozen at the next poll (:meth:`SettledHeap.adopt`).
ADOPT_PAUSE = 0.002


@dataclass
class HeapStats:
    """What the settles did so far (tests, logs and the benchmark read it)."""

    settles: int = 0
    resets: int = 0
    #: Freezes right after a long full collection of the collector's own (:meth:`SettledHeap.adopt`).
    adopts: int = 0
    #: How long the last settle held the loop (seconds).
    last_pause: float = 0.0
    #: The longest settle so far (seconds).
    longest_pause: float = 0.0
    #: The frozen count right after the last reset (None: no reset yet).
    baseline: int | None = None


class SettledHeap:
    """Freezes what survives a collection, and resets the frozen set before it grows unbounded."""

    def __init__(self, *, growth: float = GROWTH, slack: int = SLACK,
                 adopt_pause: float = ADOPT_PAUSE) -> None:
        self.growth = growth
        self.slack = slack
        self.adopt_pause = adopt_pause
        self.stats = HeapStats()
        #: Set when the collector ran a long full collection by itself; :meth:`adopt` clears it.
        self.adopt_due = False
        self._ours = False
        self._started = 0.0
        self._watchers = 0

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

    def adopt(self) -> bool:
        """After a long full collection of the collector's own: freeze its survivors.

        That collection already paid the pause; freezing what it found alive
        spares the next ones from walking it again. Only a young collection runs
        first (cheap). Skipped once the frozen count is over :meth:`limit`: the
        next :meth:`settle` resets instead. True if it froze.
        """
        self.adopt_due = False
        limit = self.limit()
        if limit is None or gc.get_freeze_count() > limit:
            return False
        self._ours = True
        try:
            gc.collect(1)
            gc.freeze()
        finally:
            self._ours = False
        self.stats.adopts += 1
        return True

    def _collections(self, phase: str, info: dict[str, Any]) -> None:
        """``gc.callbacks``: marks an adopt due after a long full collection not run here."""
        if self._ours or info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif time.perf_counter() - self._started >= self.adopt_pause:
            self.adopt_due = True

    def watching(self) -> Callable[[], None]:
        """Start following the collector's own full collections; the returned function stops it."""
        if self._watchers == 0:
            gc.callbacks.append(self._collections)
        self._watchers += 1

        def stop() -> None:
            self._watchers -= 1
            if self._watchers == 0 and self._collections in gc.callbacks:
                gc.callbacks.remove(self._collections)

        return stop

    def _took(self, started: float, what: str) -> float:
        pause = time.perf_counter() - started
        stats = self.stats
        stats.settles += 1
        stats.last_pause = pause
        stats.longest_pause = max(stats.longest_pause, pause)
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
        if self.heap.adopt_due and not self.heap.adopt() and self._changed_at is None:
            self._changed_at = now  # over the limit: reset once things are quiet
        if self._changed_at is None or now - self._changed_at < self.quiet:
            return False
        self._changed_at = None
        self.heap.adopt_due = False
        self.heap.settle()
        return True

    async def run(self) -> None:
        """Poll four times per ``quiet`` period (at most once every 50 ms), forever."""
        interval = max(self.quiet / 4, 0.05)
        stop = self.heap.watching()
        try:
            while True:
                await anyio.sleep(interval)
                self.poll(time.monotonic())
        finally:
            stop()
