"""One socket write per response: what uvicorn writes during one event-loop turn, joined.

uvicorn writes a response's status line and headers when the application sends
``http.response.start`` and its body when it sends ``http.response.body``: two
``send`` system calls, two TCP segments, and often two wake-ups of the client
for one small JSON answer. Profiles of the hub under load showed those writes
among its largest costs. :class:`CoalescingTransport` stands between the
protocol and the socket transport: writes made during one turn of the event
loop are queued and leave in one ``write`` at the end of that turn (the same
policy as :class:`mcp_hub.pipes.CoalescingWriter` toward stdio children). A
plain JSON answer — start and body sent back to back — becomes one segment;
an SSE stream's events still leave as soon as each is sent.

Everything else is the transport's own: closing writes what is queued first,
an abort drops it.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["CoalescingTransport"]


class CoalescingTransport:
    """A proxy of an ``asyncio.Transport`` whose writes of one loop turn go out as one."""

    __slots__ = ("_loop", "_queued", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._queued: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._queued:
            self._loop.call_soon(self._flush)
        self._queued.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def _flush(self) -> None:
        if not self._queued:
            return
        data = self._queued[0] if len(self._queued) == 1 else b"".join(self._queued)
        self._queued.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(len(d) for d in self._queued)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._queued.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        # is_closing, get_extra_info, pause/resume_reading, can_write_eof, ...
        return getattr(self._transport, name)
