"""Work in steps: one body of code, run whole or in slices on the event loop.

A long computation on the event loop (the definitions of a caller's
``tools/list`` after a registry change: a thousand entries sorted, filtered,
copied) stalls every call in flight. Written as a generator that yields ``None``
between pieces of its work and returns its value, the same code serves both
ways: :func:`run_steps` runs it to the end at once (the synchronous callers),
:func:`run_steps_sliced` awaits a ``pause`` at every step, which yields to the
event loop once the current slice has held it long enough (a
:class:`mcp_hub.downstream.lists.fragments.Slicer`'s ``checkpoint``).

Imports nothing of the project, so the registry's own modules may use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

__all__ = ["STEP_ITEMS", "Steps", "run_steps", "run_steps_sliced"]

T = TypeVar("T")

#: A computation in steps: yields ``None`` between its pieces, returns its value.
Steps = Generator[None, None, T]

#: How many list entries a step handles before it yields (each costs a few µs at most).
STEP_ITEMS = 32


def run_steps(steps: Steps[T]) -> T:
    """The value of ``steps``, computed at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            value: T = done.value
            return value


async def run_steps_sliced(steps: Steps[T], pause: Callable[[], Awaitable[None]]) -> T:
    """The value of ``steps``, awaiting ``pause()`` between two steps."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            value: T = done.value
            return value
        await pause()
