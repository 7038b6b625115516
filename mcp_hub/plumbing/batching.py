"""One write for every message that is ready: the batching both stdio pipes share.

Under concurrency several messages are queued at once; sending them in one
write is one syscall and one wake-up of the reader instead of many. Used by the
hub's stdout writer (:mod:`mcp_hub.downstream.stdio.transport`) and the writer to a stdio
upstream's stdin (:mod:`mcp_hub.upstream.transports`). Imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

__all__ = ["MAX_BATCH", "join_ready"]

#: At most this many messages go into one write.
MAX_BATCH = 64

T = TypeVar("T")


def join_ready(first: T, recv: MemoryObjectReceiveStream[T], encode: Callable[[T], bytes]) -> bytes:
    """``first`` and every message already waiting in ``recv`` (up to :data:`MAX_BATCH`), encoded."""
    batch = [encode(first)]
    while len(batch) < MAX_BATCH:
        try:
            batch.append(encode(recv.receive_nowait()))
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
    return b"".join(batch)
