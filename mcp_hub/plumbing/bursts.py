"""Leading-edge debouncing of change bursts, shared by both sides of the hub.

An upstream's ``list_changed`` notifications (re-list once per burst) and the
hub's own ``list_changed`` to clients (notify once per burst) follow one rule:
the first change after a quiet spell is handled at once; inside a burst, wait
briefly so one action covers many changes. Imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["settle_burst"]


async def settle_burst(last: float, *, idle: float, debounce: float, max_delay: float = 0.0,
                       marks: Callable[[], int] | None = None) -> None:
    """Return when a change may be acted on; ``last`` is when the previous one was.

    More than ``idle`` seconds after ``last``: at once (leading edge). Inside a
    burst: after ``debounce`` — or, given ``marks`` (a counter of changes), once no
    new change arrived for ``debounce``, but never later than ``max_delay``.
    """
    started = anyio.current_time()
    if started - last >= idle:
        return
    if marks is None:
        await anyio.sleep(debounce)
        return
    while True:
        seen = marks()
        await anyio.sleep(debounce)
        if marks() == seen or anyio.current_time() - started >= max_delay:
            return
