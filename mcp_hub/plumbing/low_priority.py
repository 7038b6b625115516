"""One background thread at the lowest CPU priority, for work that may wait: compression.

Deflating a megabyte-sized list answer takes a core for 10–20 ms. In a worker
thread it does not hold the event loop (zlib releases the GIL), but on a small
machine it still takes a core away from the hub's loop, its stdio upstreams and
the clients' processes exactly when they are busiest: right after a change, when
every client re-lists. Here such work runs in one thread whose scheduling
priority is the lowest there is (``nice`` 19, set for that thread alone on
Linux): it uses the CPU the calls leave over, and still makes progress under
load (a niced thread is slowed, never starved). Elsewhere the thread runs at the
usual priority.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["LowPriorityThread", "low_priority", "lower_this_thread"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
_NICE = 19


def lower_this_thread() -> bool:
    """Give the calling thread alone ``nice`` 19 (Linux); False where that is not possible."""
    if not (hasattr(os, "setpriority") and hasattr(threading, "get_native_id")):
        return False
    try:
        # On Linux a thread id in PRIO_PROCESS sets the priority of that thread alone.
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)
    except OSError:
        return False
    return True


class LowPriorityThread:
    """A daemon thread at ``nice`` 19 that runs the functions given to :meth:`run`, in order."""

    def __init__(self, name: str = "mcp-hub-background") -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], asyncio.Future[Any]] | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._started = False
        self._lock = threading.Lock()
        #: Whether the thread's priority could be lowered (False off Linux, or if refused).
        self.niced = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the thread; its result (or exception) here.

        Cancelling the caller does not stop ``fn``; its result is then dropped.
        """
        self._start()
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._jobs.put((lambda: fn(*args), future))
        return await asyncio.shield(future)

    def _start(self) -> None:
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def _serve(self) -> None:
        self.niced = lower_this_thread()
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, future = job
            try:
                outcome: tuple[bool, Any] = (True, fn())
            except BaseException as exc:  # handed to the awaiting task
                outcome = (False, exc)
            loop = future.get_loop()
            with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                loop.call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


_THREAD = LowPriorityThread()


def low_priority() -> LowPriorityThread:
    """The process's low-priority background thread (started on first use)."""
    return _THREAD
