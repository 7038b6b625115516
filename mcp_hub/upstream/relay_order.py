"""Keep an upstream's progress ahead of its answer on the way to the client.

The SDK's client session runs each progress callback as a task of its own, while
the answer to the request wakes the waiting call directly. An upstream that sends
three progress notifications and then its result can therefore have its result
relayed first, and a client drops progress that arrives after the answer. A
:class:`RelayBarrier` counts the progress relays of one call that have started
(a relay registers before its first await, and the SDK starts it before the
answer's message is read) and lets the call hand its result on only once they
are done, within a bound, so that a client that stops reading cannot hold an
answer back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio

__all__ = ["RELAY_DRAIN_SECONDS", "RelayBarrier"]

#: The longest a call's answer waits for its progress relays to finish.
RELAY_DRAIN_SECONDS = 2.0


class RelayBarrier:
    """The progress relays of one upstream call that have not finished yet."""

    __slots__ = ("_idle", "_running")

    def __init__(self) -> None:
        self._running = 0
        self._idle: anyio.Event | None = None

    @contextmanager
    def relaying(self) -> Iterator[None]:
        """Held by one progress relay while it runs."""
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            if self._running == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def drain(self) -> None:
        """Return once every relay that started has finished (at most RELAY_DRAIN_SECONDS)."""
        if self._running == 0:
            return
        idle = self._idle = self._idle or anyio.Event()
        with anyio.move_on_after(RELAY_DRAIN_SECONDS):
            await idle.wait()
