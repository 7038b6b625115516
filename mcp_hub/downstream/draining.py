"""Draining on SIGTERM for the transports: the stop signal and the HTTP 503s.

:func:`drain_on_signals` waits for SIGTERM or SIGINT, runs the hub's drain
(:mod:`mcp_hub.hub.drain`), then stops the transport; a second signal cuts the
drain period short. :class:`DrainGuard` is the HTTP side: every POST is counted
as in flight until its answer has been sent, and while the hub drains a new
JSON-RPC request (a POST carrying a request, a new ``GET /mcp`` or ``GET /sse``
stream) is answered ``503`` with ``Retry-After``. What a call in flight still
needs passes: notifications (``notifications/cancelled``), the client's answers
to sampling, elicitation or roots requests, and ``DELETE``. ``/healthz`` stays
200 and ``/readyz`` turns 503, so a load balancer stops sending new clients.
"""

from __future__ import annotations

import json
import logging
import signal
from collections.abc import Callable

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.downstream.http.body import request_body
from mcp_hub.hub.drain import Drain

__all__ = ["DrainGuard", "drain_on_signals"]

logger = logging.getLogger(__name__)


async def drain_on_signals(drain: Drain, seconds: float, stop: Callable[[], None]) -> None:
    """On the first SIGTERM/SIGINT: drain for up to ``seconds``, then ``stop()``."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received %s: draining (%d in flight, up to %g s)",
                        signal.Signals(signum).name, drain.in_flight, seconds)
            break
        async with anyio.create_task_group() as tg:

            async def hurry() -> None:
                async for signum in signals:
                    logger.info("received %s again: ending the drain now",
                                signal.Signals(signum).name)
                    drain.expire()

            tg.start_soon(hurry)
            cancelled = await drain.run(seconds)
            tg.cancel_scope.cancel()
    if cancelled:
        logger.warning("drain period over: %d call(s) still running were cancelled", cancelled)
    else:
        logger.info("drained: every call in flight finished")
    stop()


def _is_request(body: bytes) -> bool:
    """Whether a POST body carries a JSON-RPC request (a batch: any request)."""
    try:
        raw = json.loads(body)
    except ValueError:
        return True  # not ours to judge: refused like any new request
    items = raw if isinstance(raw, list) else [raw]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items)


class DrainGuard:
    """503 for new requests while the hub drains; counts HTTP requests in flight."""

    def __init__(self, app: ASGIApp, *, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope.get("method"), scope.get("path", "")
        if not self.drain.draining:
            if method != "POST":  # a GET stream may stay open for hours: not "in flight"
                await self.app(scope, receive, send)
                return
            with self.drain.hold():
                await self.app(scope, receive, send)
            return
        if path == "/healthz" or method == "DELETE":
            await self.app(scope, receive, send)
            return
        if method == "POST" and not _is_request(request_body(scope)):
            with self.drain.hold():
                await self.app(scope, receive, send)
            return
        body = {"ready": False, "draining": True} if path == "/readyz" else {
            "error": "shutting_down", "error_description": "the hub is shutting down"}
        await JSONResponse(body, status_code=503,
                           headers={"Retry-After": "5", "Connection": "close"})(scope, receive, send)
