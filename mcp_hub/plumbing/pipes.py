"""asyncio pipe plumbing shared by the hub's stdio server and its stdio children.

Both ends of the hub that talk over pipes — its own stdin/stdout
(:mod:`mcp_hub.downstream.stdio.transport`) and an upstream child started early
(:mod:`mcp_hub.upstream.stdio.prespawn`) — read and write them with asyncio's pipe transports
rather than worker threads. This module opens those transports and holds the
one write policy they share: everything sent during one turn of the event loop
goes out in one write, because under concurrency each write is a syscall and a
wake-up of the reader on the other side. Standard library only.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["CoalescingWriter", "open_read_pipe", "open_write_pipe"]


async def open_read_pipe(pipe: Any, *, limit: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    """A stream reader on the read end ``pipe`` (a file object), and its transport."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    return reader, transport


async def open_write_pipe(pipe: Any) -> asyncio.StreamWriter:
    """A stream writer (with flow control) on the write end ``pipe`` (a file object)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe)
    return asyncio.StreamWriter(transport, protocol, None, loop)


#: The most one turn of the event loop writes to a pipe; the rest of a larger queue
#: (a ``tools/list`` answer of megabytes) leaves in the next turns, in order.
WRITE_CHUNK = 128 * 1024


class CoalescingWriter:
    """A pipe writer that sends everything queued in one event-loop turn as one write.

    At most ``chunk`` bytes leave per turn: a larger queue is written over several
    turns, in order and unchanged, so that other tasks (the calls in flight) run
    between two pieces of a megabyte answer instead of waiting for all of it to be
    copied. Messages queued meanwhile go out after it, never inside it.
    :meth:`send` waits for the pipe to drain only when more than ``high_water``
    bytes are buffered, so a slow reader slows its writers instead of growing memory.
    """

    def __init__(self, writer: asyncio.StreamWriter, high_water: int, *,
                 chunk: int = WRITE_CHUNK) -> None:
        self.writer = writer
        self._high_water = high_water
        self._chunk = chunk
        self._queued: list[bytes | memoryview] = []

    def is_closing(self) -> bool:
        return self.writer.is_closing()

    def flush(self) -> None:
        """Write up to ``chunk`` bytes of what is queued now (in one write); the rest next turn."""
        data = self._take()
        if data and not self.writer.is_closing():
            self.writer.write(data)
        if self._queued:
            asyncio.get_running_loop().call_soon(self.flush)

    def _take(self) -> bytes:
        queued = self._queued
        if len(queued) == 1 and len(queued[0]) <= self._chunk:
            return bytes(queued.pop())
        parts: list[bytes | memoryview] = []
        room = self._chunk
        while queued and room > 0:
            head = queued[0]
            if len(head) <= room:
                parts.append(queued.pop(0))
                room -= len(head)
            else:
                view = memoryview(head)
                parts.append(view[:room])
                queued[0] = view[room:]
                room = 0
        return b"".join(parts)

    async def send(self, data: bytes) -> None:
        """Queue ``data`` for this turn's write; BrokenPipeError once the pipe is closing.

        A reader that went away during the drain raises ConnectionError.
        """
        writer = self.writer
        if writer.is_closing():
            raise BrokenPipeError("the pipe is closed")
        if not self._queued:
            asyncio.get_running_loop().call_soon(self.flush)
        self._queued.append(data)
        if writer.transport.get_write_buffer_size() > self._high_water:
            await writer.drain()

    def close(self) -> None:
        """Write everything queued, then close the pipe."""
        data = b"".join(self._queued)
        self._queued.clear()
        if data and not self.writer.is_closing():
            self.writer.write(data)
        self.writer.close()
