"""What a per-user session's upstream sends during a call, relayed to the call's client.

A hub-wide connection forwards what its upstream reports or asks during a call
(progress, log messages, sampling, elicitation, roots) to the downstream client
that made the call; a per-user session does the same through a
:class:`SessionRelay`, one per (server, identity) session. Progress is tied to
its call by the progress token the SDK puts in the request. A log message or a
request of the upstream names no call, so it goes to the most recent call in
flight on that session whose client can answer it; every call on the session
belongs to the same identity, so one person's upstream never talks to another's
client. With no such call, the upstream gets a clear error.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import mcp.types as types
from mcp.shared.dispatcher import ProgressFnT

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.relay_order import RelayBarrier
from mcp_hub.upstream.relays import cannot_relay, relayed

__all__ = ["SessionRelay"]

logger = logging.getLogger("mcp_hub.upstream.peruser")
T = TypeVar("T")


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

    async def _relay(self, what: str, capability: str, capable: Callable[[CallContext], bool],
                     ask: Callable[[CallContext], Awaitable[T]]) -> T | types.ErrorData:
        """``ask`` the client of the latest call that is ``capable``; its error goes back
        to the upstream, as does the absence of such a call."""
        call = next((c for c in reversed(self._inflight) if capable(c)), None)
        if call is None:
            return cannot_relay(what, "no call is in flight on this session" if not self._inflight
                                else f"the client of the call in flight does not support {capability}")
        return await relayed(logger, self.server, what, ask(call))

    async def on_sampling(self, context: Any, params: types.CreateMessageRequestParams
                          ) -> types.CreateMessageResult | types.ErrorData:
        """The session's ``sampling_callback``."""
        return await self._relay("sampling/createMessage", "sampling", lambda c: c.can_sample,
                                 lambda c: c.create_message(params))

    async def on_elicitation(self, context: Any, params: types.ElicitRequestParams
                             ) -> types.ElicitResult | types.ErrorData:
        """The session's ``elicitation_callback``."""
        return await self._relay("elicitation/create", "elicitation", lambda c: c.can_elicit,
                                 lambda c: c.elicit(params))

    async def on_list_roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        """The session's ``list_roots_callback``."""
        return await self._relay("roots/list", "roots", lambda c: c.can_list_roots,
                                 lambda c: c.list_roots())

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """The session's ``logging_callback``: to the latest call's client, if one is running."""
        if not self._inflight:
            logger.debug("upstream %s: a log message outside any call was dropped", self.server,
                         extra={"server": self.server})
            return
        await self._inflight[-1].log(params.level, params.data, params.logger)

