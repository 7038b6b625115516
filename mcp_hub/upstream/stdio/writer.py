"""The write stream toward a stdio child: messages go into its stdin in the sender's task.

The SDK's client writes every message into the write stream it is given. A
memory stream read by a writer task cost every request two extra event-loop
turns (the hand-over to that task, then the pipe write) and the task's
bookkeeping. :class:`StdinWriteStream` instead encodes the message and hands
the bytes to the child's stdin at once. That stdin already coalesces: whatever
is sent during one loop turn leaves in one write
(:class:`mcp_hub.plumbing.pipes.CoalescingWriter`), so concurrent requests still share
a syscall, as the writer task's batching did.

A pipe that broke (the child stopped reading) ends the session, as before: the
read side is closed (``on_broken``) so the session sees its end, and the send
fails with ``BrokenResourceError``, which the SDK reports as a closed connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp.shared.message import SessionMessage

__all__ = ["StdinWriteStream", "encode"]


def encode(message: SessionMessage) -> bytes:
    """One JSON-RPC message as a line of the stdio transport."""
    return message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


class StdinWriteStream:
    """A write stream (``send``, ``aclose``, async context manager) onto a child's stdin."""

    __slots__ = ("_closed", "_on_broken", "_stdin")

    def __init__(self, stdin: Any, on_broken: Callable[[], None]) -> None:
        self._stdin = stdin
        self._on_broken = on_broken
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        await self.send_bytes(encode(item))

    async def send_bytes(self, line: bytes, /) -> None:
        """One message already encoded as a line (the lean ``tools/call`` writes its own)."""
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await self._stdin.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The child stopped reading: end the session rather than hang a request.
            self._closed = True
            self._on_broken()
            raise anyio.BrokenResourceError from None

    def close(self) -> None:
        """No more messages (the child's stdin itself is closed when the child is stopped)."""
        self._closed = True

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> StdinWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
