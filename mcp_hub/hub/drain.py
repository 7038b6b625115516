"""Draining: on SIGTERM the hub lets the work in flight finish, for a bounded time.

:class:`Drain` counts what is in flight: every tool call (:meth:`Hub.call_tool`
runs inside :meth:`Drain.call`) and, over HTTP, every request that is still
being answered (:meth:`Drain.hold`). When the hub is told to stop:

1. ``draining`` turns on: a new tool call is refused with an error result, and
   over HTTP a new request gets ``503 Service Unavailable``
   (:mod:`mcp_hub.downstream.draining`);
2. the calls in flight get up to ``hub.drain_seconds`` to finish;
3. whatever still runs then is cancelled: the upstream receives
   ``notifications/cancelled`` and the client gets an error result saying the
   hub shut down before the call finished;
4. the transport stops and the hub closes its upstreams.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from mcp import types

__all__ = ["Drain"]

#: After the drain period, how long cancelled calls get to deliver their error.
SETTLE_SECONDS = 2.0


class Drain:
    """What is in flight, and the bounded wait for it when the hub stops."""

    def __init__(self) -> None:
        self.draining = False
        self.seconds = 0.0
        self._scopes: set[anyio.CancelScope] = set()
        self._held = 0
        self._changed: anyio.Event | None = None
        self._expired: anyio.Event | None = None

    @property
    def in_flight(self) -> int:
        return len(self._scopes) + self._held

    def _pulse(self) -> None:
        event, self._changed = self._changed, None
        if event is not None:
            event.set()

    @contextmanager
    def call(self) -> Iterator[anyio.CancelScope]:
        """Run one tool call; the drain cancels it if it outlives the drain period."""
        scope = anyio.CancelScope()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)
            self._pulse()

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Count a transport request (an HTTP request being answered) as in flight."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
            self._pulse()

    async def _until_idle(self) -> None:
        while self.in_flight:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def expire(self) -> None:
        """End the drain period now (a second stop signal)."""
        if self._expired is not None:
            self._expired.set()

    async def run(self, seconds: float) -> int:
        """Drain: refuse new work, wait up to ``seconds`` for the work in flight, then
        cancel what is left; returns how many calls were cancelled."""
        self.draining = True
        self.seconds = seconds
        self._expired = anyio.Event()
        expired = self._expired
        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as tg:

                async def idle() -> None:
                    await self._until_idle()
                    tg.cancel_scope.cancel()

                async def cut_short() -> None:
                    await expired.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(idle)
                tg.start_soon(cut_short)
        left = list(self._scopes)
        for scope in left:
            scope.cancel()
        with anyio.move_on_after(SETTLE_SECONDS):
            await self._until_idle()
        return len(left)

    def refused(self, name: str) -> types.CallToolResult:
        """The answer to a call that arrives while the hub drains."""
        return types.CallToolResult(
            content=[types.TextContent(
                text=f"The hub is shutting down; tool '{name}' was not called.")],
            is_error=True)

    def cancelled(self, name: str) -> types.CallToolResult:
        """The answer to a call that was still running when the drain period ended."""
        return types.CallToolResult(
            content=[types.TextContent(
                text=f"The hub shut down before tool '{name}' finished: the call was still "
                f"running at the end of the {self.seconds:g} s drain period and was "
                "cancelled.")],
            is_error=True)
