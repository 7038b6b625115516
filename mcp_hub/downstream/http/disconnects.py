"""Cancel a fast-path call when its client closes the connection, without a task per call.

Nobody is left to answer once the client has gone, so the call is cancelled
(and with it the upstream request). Noticing that needs something waiting on
the ASGI ``receive`` until ``http.disconnect``; a task and a task group for
every call showed in profiles of a busy hub at several per cent of its CPU,
while most calls end within milliseconds. So the waiting task is started only
for a call still running after :data:`WATCH_AFTER` seconds: a timer until then.
A client that leaves during those first milliseconds gets its call run to the
end and the answer dropped, as with any proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator

import anyio
from starlette.types import Receive

__all__ = ["WATCH_AFTER", "watch_disconnect"]

logger = logging.getLogger(__name__)

#: Seconds a call runs before its connection is watched for a disconnect.
WATCH_AFTER = 0.05


async def _wait_for_disconnect(receive: Receive, cancel: anyio.CancelScope,
                               unless: Callable[[], bool] | None) -> None:
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if unless is None or not unless():
                    cancel.cancel()
                return
    except Exception:  # the server tore the request down: nothing to watch any more
        logger.debug("watching a request for a disconnect failed", exc_info=True)


@contextlib.contextmanager
def watch_disconnect(receive: Receive, cancel: anyio.CancelScope,
                     after: float = WATCH_AFTER,
                     unless: Callable[[], bool] | None = None) -> Iterator[None]:
    """While the block runs, a disconnect of the client cancels ``cancel`` (see the module),
    unless ``unless()`` says the call goes on without its connection (its stream was
    closed on purpose, for the client to resume it)."""
    loop = asyncio.get_running_loop()
    task: asyncio.Task[None] | None = None

    def start() -> None:
        nonlocal task
        task = loop.create_task(_wait_for_disconnect(receive, cancel, unless))

    timer = loop.call_later(after, start)
    try:
        yield
    finally:
        timer.cancel()
        if task is not None:
            task.cancel()
