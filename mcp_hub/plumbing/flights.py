"""One worker per key at a time; the others wait for it, then look in the cache again.

After a ``list_changed`` every client re-lists at once, and each would otherwise
start the same expensive work (a list's preparation, the caller's definitions, a
page's deflation). The first to find nothing cached takes the flight of its key
(:meth:`Flights.flying`); the others wait for that flight to land
(:meth:`Flights.joined`) and find its result cached, or take the next flight if
it kept nothing (the key changed meanwhile, or it failed).

Imports only anyio.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager

import anyio

__all__ = ["Flights"]


class Flights:
    """The keys being worked on now, each with the event that ends its flight."""

    def __init__(self) -> None:
        self._flying: dict[Hashable, anyio.Event] = {}

    def __len__(self) -> int:
        """How many flights are under way."""
        return len(self._flying)

    async def joined(self, key: Hashable) -> bool:
        """Wait for the flight of ``key`` if one is under way; True if it waited."""
        landing = self._flying.get(key)
        if landing is None:
            return False
        await landing.wait()
        return True

    @contextmanager
    def flying(self, key: Hashable) -> Iterator[None]:
        """The flight of ``key``: the work inside, ended (and the waiters woken) however it ends."""
        landing = self._flying[key] = anyio.Event()
        try:
            yield
        finally:
            del self._flying[key]
            landing.set()
