"""One socket write per response: what uvicorn writes during one event-loop turn, joined.

uvicorn writes a response's status line and headers when the application sends
``http.response.start`` and its body when it sends ``http.response.body``: two
``send`` system calls, two TCP segments, and often two wake-ups of the client
for one small JSON answer. Profiles of the hub under load showed those writes
among its largest costs. :class:`CoalescingTransport` stands between the
protocol and the socket transport: writes made during one turn of the event
loop are queued and leave in one ``write`` at the end of that turn (the same
policy as :class:`mcp_hub.plumbing.pipes.CoalescingWriter` toward stdio children). A
plain JSON answer — start and body sent back to back — becomes one segment;
an SSE stream's events still leave as soon as each is sent.

Everything else is the transport's own: closing writes what is queued first,
an abort drops it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_hub.downstream.http.bulk_writes import (
    BULK_BYTES,
    HIGH_WATER,
    BulkJob,
    bulk_writer,
    socket_of,
)

__all__ = ["CoalescingTransport"]


class CoalescingTransport:
    """A proxy of an ``asyncio.Transport`` whose writes of one loop turn go out as one.

    A write of ``BULK_BYTES`` or more on a plain TCP connection leaves from the bulk
    writer's thread instead (:mod:`mcp_hub.downstream.http.bulk_writes`); the writes after
    it on this connection follow it there until it is done.
    """

    __slots__ = ("_bulk", "_close_after", "_eof_after", "_fd", "_loop", "_protocol", "_queued",
                 "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop,
                 protocol: Any = None, *, bulk: bool = True) -> None:
        self._transport = transport
        self._loop = loop
        self._queued: list[bytes] = []
        #: The protocol, paused and resumed for bytes waiting in the bulk writer.
        self._protocol = protocol
        #: The socket's descriptor when large writes may leave from the bulk writer.
        self._fd = socket_of(transport) if bulk else None
        self._bulk: BulkJob | None = None
        self._close_after = False
        self._eof_after = False

    @property
    def offloads(self) -> bool:
        """Whether large writes on this connection leave from the bulk writer's thread."""
        return self._fd is not None

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
        queued = self._queued
        if not queued:
            return
        self._queued = []
        if self._transport.is_closing():
            return
        job = self._bulk
        if job is not None:
            if job.append(queued):  # behind the bytes still in the thread
                if job.pending > HIGH_WATER and self._protocol is not None:
                    with job.lock:
                        pause, job.paused = not job.paused, True
                    if pause:
                        self._protocol.pause_writing()
                return
            self._bulk = None  # it has finished: its bytes are all in the socket
        if (self._fd is not None and sum(map(len, queued)) >= BULK_BYTES
                and not self._transport.get_write_buffer_size()):
            # The pieces as they are (a list answer's result is not copied).
            self._bulk = bulk_writer().start(self._fd, queued, self, self._loop)
            if self._bulk is not None:
                return
        self._transport.write(queued[0] if len(queued) == 1 else b"".join(queued))

    # -- told by the bulk writer, in the loop's thread ---------------------------------------------
    def bulk_done(self, job: BulkJob, error: BaseException | None) -> None:
        if self._bulk is job:
            self._bulk = None
        if job.paused and self._protocol is not None:
            job.paused = False
            self._protocol.resume_writing()
        if error is not None:
            self._transport.abort()  # the client went away or stopped reading
            return
        if self._bulk is None:
            self._flush()
            if self._eof_after:
                self._transport.write_eof()
            if self._close_after:
                self._transport.close()

    def bulk_resume(self, job: BulkJob) -> None:
        if self._protocol is not None:
            self._protocol.resume_writing()

    def _sending(self) -> bool:
        job = self._bulk
        return job is not None and not job.finished

    # -- the rest is the transport's own -------------------------------------------------------------
    def is_closing(self) -> bool:
        return self._close_after or self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        job = self._bulk
        return (self._transport.get_write_buffer_size() + sum(len(d) for d in self._queued)
                + (job.pending if job is not None else 0))

    def write_eof(self) -> None:
        self._flush()
        if self._sending():
            self._eof_after = True
            return
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        if self._sending():
            self._close_after = True  # once the bulk writer has sent what it holds
            return
        self._transport.close()

    def abort(self) -> None:
        self._queued.clear()
        job, self._bulk = self._bulk, None
        if job is not None:
            job.abort()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        # get_extra_info, pause/resume_reading, can_write_eof, ...
        return getattr(self._transport, name)
