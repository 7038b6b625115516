"""Large HTTP answers leave from a thread of their own, at the lowest CPU priority.

Writing a megabyte-sized answer to a socket is kernel work: copying the bytes
and, over loopback, the receiving side's TCP processing as well. Done by the
event loop's transport, it runs in the loop's thread, and every call waits
behind it: with a client listing 1,000 tools in a loop, the socket writes of
the answers were 41% of the loop thread's busy samples. Here a write of
:data:`BULK_BYTES` or more to a plain TCP connection is handed to one thread
(``nice`` 19, :func:`mcp_hub.plumbing.low_priority.lower_this_thread`) that sends it on
a duplicate of the connection's socket, with the GIL released; the loop only
hands over a reference to the bytes. The thread takes the CPU that calls leave
over, and sends to many connections in turns of :data:`TURN_BYTES`.

Order and lifetime stay the transport's (:class:`mcp_hub.downstream.http.writes.CoalescingTransport`
is the only user):

* while a connection has bytes in the thread, every later write on it is
  appended behind them, and ``close()`` waits until they have left;
* the duplicate descriptor keeps the socket open until the thread is done with
  it, so a descriptor number reused by a newer connection is never written to;
* a failed send (the client went away) aborts the connection, as the transport
  would; so does a client that has not taken a byte for :data:`STALL_SECONDS`,
  so that memory stays bounded;
* past :data:`HIGH_WATER` bytes waiting, the protocol is paused
  (``pause_writing``) and resumed below :data:`LOW_WATER`, as with the
  transport's own buffer.

TLS connections (their bytes must go through the TLS layer) and platforms
without ``MSG_NOSIGNAL`` keep the transport's own writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections import deque
from typing import Any, Protocol

from mcp_hub.plumbing.low_priority import lower_this_thread

__all__ = ["BULK_BYTES", "BulkJob", "BulkOwner", "BulkWriter", "bulk_writer", "socket_of"]

logger = logging.getLogger(__name__)

#: Writes from this size on go to the thread.
BULK_BYTES = 64 * 1024
#: The most one connection gets in one turn of the thread before the others' turn.
TURN_BYTES = 256 * 1024
#: Bytes waiting for one connection past which its protocol is paused, and below which resumed.
HIGH_WATER = 8 << 20
LOW_WATER = 1 << 20
#: A connection whose client takes no byte for this long is aborted.
STALL_SECONDS = 60.0

_NOSIGNAL: int | None = getattr(socket, "MSG_NOSIGNAL", None)


class BulkOwner(Protocol):
    """The loop side of a job: told (in the loop's thread) when it is done or may resume."""

    def bulk_done(self, job: BulkJob, error: BaseException | None) -> None: ...

    def bulk_resume(self, job: BulkJob) -> None: ...


def socket_of(transport: Any) -> int | None:
    """The descriptor of a plain TCP transport's socket; None for TLS or anything else."""
    if _NOSIGNAL is None or transport.get_extra_info("sslcontext") is not None:
        return None
    sock = transport.get_extra_info("socket")
    if sock is None or getattr(sock, "type", None) != socket.SOCK_STREAM:
        return None
    try:
        fd = int(sock.fileno())
    except (OSError, ValueError):
        return None
    return fd if fd >= 0 else None


class BulkJob:
    """The bytes of one connection that the thread is sending, in order."""

    __slots__ = ("aborted", "chunks", "finished", "lock", "loop", "owner", "paused", "pending",
                 "progress", "sock")

    def __init__(self, sock: socket.socket, owner: BulkOwner, loop: asyncio.AbstractEventLoop) -> None:
        self.sock = sock
        self.owner = owner
        self.loop = loop
        self.lock = threading.Lock()
        self.chunks: deque[memoryview] = deque()
        #: Bytes not yet sent.
        self.pending = 0
        #: The thread has sent everything and let go of the socket: the transport writes again.
        self.finished = False
        self.aborted = False
        #: The protocol was paused for this job (loop side sets, thread side clears).
        self.paused = False
        self.progress = time.monotonic()

    def append(self, pieces: list[bytes]) -> bool:
        """Queue ``pieces`` behind what is waiting; False once the job has finished."""
        with self.lock:
            if self.finished:
                return False
            for data in pieces:
                self.chunks.append(memoryview(data))
                self.pending += len(data)
            return True

    def abort(self) -> None:
        """Drop what is waiting (the thread closes its socket at its next turn)."""
        with self.lock:
            self.aborted = True
            self.chunks.clear()
            self.pending = 0

    def _tell(self, fn: Any, *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            self.loop.call_soon_threadsafe(fn, self, *args)


class BulkWriter:
    """The thread that sends the jobs, and the way to hand it one."""

    def __init__(self) -> None:
        self._new: queue.SimpleQueue[BulkJob] = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Jobs handed over, and connections aborted because their client stopped reading.
        self.started = 0
        self.stalled = 0

    def start(self, fd: int, pieces: list[bytes], owner: BulkOwner,
              loop: asyncio.AbstractEventLoop) -> BulkJob | None:
        """Send ``pieces`` on the socket ``fd`` from the thread; None if it cannot take them."""
        try:
            sock = socket.socket(fileno=os.dup(fd))  # keeps the socket's blocking mode as it is
        except OSError:
            return None
        job = BulkJob(sock, owner, loop)
        job.append(pieces)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mcp-hub-bulk-writes",
                                                daemon=True)
                self._thread.start()
        self.started += 1
        self._new.put(job)
        with contextlib.suppress(BlockingIOError):  # a wake-up is already waiting
            self._wake_w.send(b"\0")
        return job

    # -- the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        lower_this_thread()
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ, None)
        jobs: set[BulkJob] = set()
        while True:
            for key, _ in selector.select(1.0 if jobs else None):
                job = key.data
                if job is None:
                    self._take_new(jobs, selector)
                    continue
                over = self._send(job)
                if over is not None:
                    self._finish(job, over, jobs, selector)
            now = time.monotonic()
            for job in [j for j in jobs if now - j.progress > STALL_SECONDS]:
                self.stalled += 1
                logger.warning("a client took no bytes of its answer for %.0f s: closing the "
                               "connection", STALL_SECONDS)
                self._finish(job, TimeoutError("the client stopped reading"), jobs, selector)

    def _take_new(self, jobs: set[BulkJob], selector: selectors.BaseSelector) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        while True:
            try:
                job = self._new.get_nowait()
            except queue.Empty:
                return
            jobs.add(job)
            selector.register(job.sock, selectors.EVENT_WRITE, job)
            over = self._send(job)  # most sockets take the first bytes at once
            if over is not None:
                self._finish(job, over, jobs, selector)

    def _send(self, job: BulkJob) -> BaseException | bool | None:
        """One turn of sending for ``job``: None while bytes remain, else how it ended
        (True: all sent; False: aborted; an exception: the send failed)."""
        budget = TURN_BYTES
        flags = _NOSIGNAL or 0
        while budget > 0:
            with job.lock:
                if job.aborted:
                    job.finished = True
                    return False
                if not job.chunks:
                    job.finished = True
                    return True
                view = job.chunks[0]
            try:
                sent = job.sock.send(view[:budget], flags)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError as exc:
                return exc
            job.progress = time.monotonic()
            budget -= sent
            with job.lock:
                if job.aborted:
                    continue
                if sent == len(view):
                    job.chunks.popleft()
                else:
                    job.chunks[0] = view[sent:]
                job.pending -= sent
                resume = job.paused and job.pending < LOW_WATER
                if resume:
                    job.paused = False
            if resume:
                job._tell(job.owner.bulk_resume)
        return None

    def _finish(self, job: BulkJob, how: BaseException | bool, jobs: set[BulkJob],
                selector: selectors.BaseSelector) -> None:
        """Let go of the job's socket (unregistered before it is closed) and tell its owner."""
        with job.lock:
            job.finished = True
            job.chunks.clear()
            job.pending = 0
        jobs.discard(job)
        selector.unregister(job.sock)
        job.sock.close()
        if how is not False:
            job._tell(job.owner.bulk_done, None if how is True else how)


_WRITER = BulkWriter()


def bulk_writer() -> BulkWriter:
    """The process's bulk writer (its thread starts with the first job)."""
    return _WRITER
