"""Progress and log messages of a per-user session, relayed to the client of the call.

A hub-wide connection forwards what its upstream reports during a call (progress
notifications, log messages) to the downstream client that made the call; a
per-user session does the same through a :class:`SessionRelay`, one per
(server, identity) session. Progress is tied to its call by the progress token
the SDK puts in the request. A log message names no request, so it goes to the
most recent call in flight on that session; every call on it belongs to the
same identity, so one person's upstream never talks to another's client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import mcp.types as types
from mcp.shared.dispatcher import ProgressFnT

from mcp_hub.context import CallContext
from mcp_hub.upstream.relay_order import RelayBarrier

__all__ = ["SessionRelay"]

logger = logging.getLogger("mcp_hub.upstream.peruser")


class SessionRelay:
    """The calls in flight on one per-user session, and the callbacks that reach them."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._inflight: list[CallContext] = []

    @contextmanager
    def calling(self, call: CallContext) -> Iterator[tuple[ProgressFnT, RelayBarrier]]:
        """Track ``call`` while it runs; yields the progress callback for its request and
        the barrier its answer waits on (progress sent before the answer goes first)."""
        relays = RelayBarrier()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            with relays.relaying():
                if call.progress_token is not None:
                    await call.report_progress(progress, total, message)

        self._inflight.append(call)
        try:
            yield on_progress, relays
        finally:
            self._inflight.remove(call)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """The session's ``logging_callback``: to the latest call's client, if one is running."""
        if not self._inflight:
            logger.debug("upstream %s: a log message outside any call was dropped", self.server,
                         extra={"server": self.server})
            return
        await self._inflight[-1].log(params.level, params.data, params.logger)
