"""A request in flight on one upstream connection: the call it serves and its deadline.

:class:`InFlightCall` is what a connection keeps per request it forwards
(:mod:`mcp_hub.upstream.calls`): the downstream call to route the upstream's own
requests to (:mod:`mcp_hub.upstream.relays`), and the timeout that progress
extends and a relayed request pauses. :data:`current_call` names the record of
the request the current task forwards.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from mcp_hub.pipeline.context import CallContext

__all__ = ["InFlightCall", "current_call"]


current_call: contextvars.ContextVar[InFlightCall | None] = contextvars.ContextVar(
    "mcp_hub_upstream_call", default=None
)


class InFlightCall:
    """A request in flight on this server: routing target and adjustable deadline."""

    __slots__ = ("call", "conn", "hard_deadline", "pauses", "remaining", "scope", "timeout")

    def __init__(self, conn: object, call: CallContext | None, timeout: float,
                 hard_deadline: float) -> None:
        #: The state of the connection forwarding it (compared by identity only).
        self.conn = conn
        self.call = call
        self.timeout = timeout
        self.hard_deadline = hard_deadline
        self.scope: anyio.CancelScope | None = None
        self.pauses = 0
        self.remaining = 0.0

    def extend(self) -> None:
        """Upstream progress: the timeout starts again (bounded by the hard deadline)."""
        scope = self.scope
        if scope is not None and not self.pauses:
            scope.deadline = min(anyio.current_time() + self.timeout, self.hard_deadline)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the clock while the downstream client answers a request of this call."""
        scope = self.scope
        if scope is None:
            yield
            return
        if not self.pauses:
            self.remaining = scope.deadline - anyio.current_time()
            scope.deadline = math.inf
        self.pauses += 1
        try:
            yield
        finally:
            self.pauses -= 1
            if not self.pauses:
                scope.deadline = min(anyio.current_time() + max(self.remaining, 0.0),
                                     self.hard_deadline)
