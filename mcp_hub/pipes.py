"""asyncio pipe plumbing shared by the hub's stdio server and its stdio children.

Both ends of the hub that talk over pipes — its own stdin/stdout
(:mod:`mcp_hub.downstream.stdio`) and an upstream child started early
(:mod:`mcp_hub.prespawn`) — read and write them with asyncio's pipe transports
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


class CoalescingWriter:
    """A pipe writer that sends everything queued in one event-loop turn as one write.

    :meth:`send` waits for the pipe to drain only when more than ``high_water``
    bytes are buffered, so a slow reader slows its writers instead of growing memory.
    """

    def __init__(self, writer: asyncio.StreamWriter, high_water: int) -> None:
        self.writer = writer
        self._high_water = high_water
        self._queued: list[bytes] = []

    def is_closing(self) -> bool:
        return self.writer.is_closing()

    def flush(self) -> None:
        """Write what is queued now (in one write)."""
        data = b"".join(self._queued)
        self._queued.clear()
        if data and not self.writer.is_closing():
            self.writer.write(data)

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
        """Write what is queued, then close the pipe."""
        self.flush()
        self.writer.close()
