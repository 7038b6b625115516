"""The hub's own stdio server transport: non-blocking pipes, no worker threads.

The SDK's ``stdio_server`` hands every line read and every write+flush to a
worker thread; on the hub's hot path that thread hand-off is about a quarter of
the CPU a proxied call costs. This transport reads and writes the pipes with
asyncio's pipe transports instead, and answers a request it cannot parse with a
JSON-RPC error that carries the request's id (the SDK drops such a line, and the
client waits for its own timeout).

Like the SDK, it keeps the protocol safe from stray output: fd 0 and fd 1 are
duplicated for the protocol, then fd 0 is pointed at the null device and fd 1 at
stderr while serving, so a ``print`` in a tool or a child process can never
corrupt the stream. Both are restored on exit. When stdin or stdout is not a
pipe, socket or terminal (a regular file), it falls back to the SDK transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import mcp.types as types
import pydantic_core
from mcp.server.stdio import stdio_server as sdk_stdio_server
from mcp.shared.message import SessionMessage

from mcp_hub.compat.sdk_modules import ReadStream, WriteStream, create_context_streams
from mcp_hub.downstream.jsonrpc import INVALID_ID, PARSE_TOO_DEEP, has_invalid_id, request_id_of
from mcp_hub.plumbing.batching import join_ready
from mcp_hub.plumbing.pipes import CoalescingWriter, open_read_pipe, open_write_pipe

__all__ = ["stdio_server"]

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
_HIGH_WATER = 1024 * 1024


def _pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


def _error_for(line: bytes, exc: Exception) -> bytes | None:
    """A JSON-RPC error answering an unparseable request, if it has an id to answer."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    except RecursionError:
        return json.dumps(PARSE_TOO_DEEP).encode() + b"\n"
    if has_invalid_id(raw):
        return json.dumps(INVALID_ID).encode() + b"\n"
    # Only a JSON-RPC 2.0 request with a usable id is answered; anything else is not a
    # request the spec lets us reply to, and the SDK reports it as a transport error.
    rid = request_id_of(raw)
    if rid is None:
        return None
    if isinstance(rid, int) and abs(rid) > 2**53:
        return None
    code = types.INVALID_PARAMS if "params" in raw else types.INVALID_REQUEST
    reason = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
    error = {"jsonrpc": "2.0", "id": rid,
             "error": {"code": code, "message": f"Invalid request: {reason}"}}
    return json.dumps(error).encode() + b"\n"


def _invalid_id(line: bytes) -> bool:
    """Whether a line the SDK took for a notification carries an unusable top-level id."""
    if b'"id"' not in line:
        return False
    try:
        return has_invalid_id(json.loads(line))
    except (ValueError, RecursionError):
        return False


class FastPath(Protocol):
    """What the transport asks of a fast path (:class:`~mcp_hub.downstream.stdio.fastpath.StdioFastPath`)."""

    def wants(self, line: bytes) -> bool: ...
    def intercept(self, raw: Any) -> bool: ...
    def outgoing(self, message: Any) -> None: ...
    def close(self) -> None: ...


FastPathFactory = Callable[[Callable[[bytes], Awaitable[None]], anyio.abc.TaskGroup], FastPath]


@asynccontextmanager
async def stdio_server(
    fast_path: FastPathFactory | None = None,
) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
    """Serve MCP on this process's stdin/stdout (see the module docstring).

    ``fast_path`` builds an object that may take some messages off the input
    before the SDK server sees them (the ``tools/call`` fast path).
    """
    if not (_pipe_like(0) and _pipe_like(1)):
        async with sdk_stdio_server() as streams:
            yield streams
        return
    pipes = _StdioPipes(asyncio.get_running_loop())
    async with _protocol_fds() as (in_fd, out_fd):
        try:
            await pipes.open(in_fd, out_fd)
            async with anyio.create_task_group() as tg:
                pipes.fast = fast_path(pipes.send_raw, tg) if fast_path is not None else None
                tg.start_soon(pipes.stdin_reader)
                tg.start_soon(pipes.stdout_writer)
                try:
                    yield pipes.read_stream, pipes.write_stream
                finally:
                    # EOF for the reader; the writer drains what the server still sent,
                    # bounded so a stuck pipe cannot hold the exit.
                    pipes.stop_reading()
                    tg.cancel_scope.deadline = anyio.current_time() + 5
        finally:
            pipes.close()


@asynccontextmanager
async def _protocol_fds() -> AsyncIterator[tuple[int, int]]:
    """Duplicates of fd 0 and 1 for the protocol; fd 0 → null device, fd 1 → stderr meanwhile.

    A ``print`` in a tool or a child process can then never corrupt the stream.
    Both fds and their blocking mode are restored on exit.
    """
    blocking = (os.get_blocking(0), os.get_blocking(1))
    saved_in, saved_out = os.dup(0), os.dup(1)
    try:
        in_fd, out_fd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:  # no stderr: stray output goes nowhere rather than onto the wire
            sink = os.open(os.devnull, os.O_WRONLY)
            os.dup2(sink, 1)
            os.close(sink)
        yield in_fd, out_fd
    finally:
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        # The pipe transports set O_NONBLOCK on the shared open file; give it back as it was.
        for fd, was_blocking in ((0, blocking[0]), (1, blocking[1])):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was_blocking)


class _StdioPipes:
    """The protocol pipes as asyncio pipe transports, and the two tasks that serve them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.rtransport: asyncio.BaseTransport | None = None
        self.out: CoalescingWriter | None = None
        self.fast: FastPath | None = None
        self.read_writer, self.read_stream = create_context_streams[SessionMessage | Exception](0)
        # A plain memory stream on the write side: the writer drains everything that is
        # ready with receive_nowait and sends it in one write.
        self.write_stream, self.write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def open(self, in_fd: int, out_fd: int) -> None:
        rfile = os.fdopen(in_fd, "rb", buffering=0)
        wfile = os.fdopen(out_fd, "wb", buffering=0)
        self.reader, self.rtransport = await open_read_pipe(rfile, limit=MAX_LINE_BYTES)
        self.out = CoalescingWriter(await open_write_pipe(wfile), _HIGH_WATER)

    async def send_raw(self, data: bytes) -> None:
        """Queue ``data``; everything written during one turn of the event loop goes out in one write.

        Under concurrency many answers finish together, and each write is a syscall
        plus a wake-up of the client.
        """
        out = self.out
        if out is None:
            return
        try:
            await out.send(data)
        except ConnectionError:  # closed, or the client went away; the reader sees EOF next
            return

    async def stdin_reader(self) -> None:
        try:
            async with self.read_writer:
                while True:
                    try:
                        line = await self.reader.readline()
                    except (asyncio.LimitOverrunError, ValueError):
                        logger.warning("dropped an over-long line on stdin (limit %d bytes)",
                                       MAX_LINE_BYTES)
                        continue
                    if not line:
                        return
                    if line.strip() and not self._fast_took(line):
                        await self._deliver(line)
        except anyio.ClosedResourceError:
            await anyio.lowlevel.checkpoint()
        finally:
            if self.fast is not None:
                self.fast.close()

    def _fast_took(self, line: bytes) -> bool:
        """Whether the fast path answered this line itself."""
        fast = self.fast
        if fast is None or not fast.wants(line):
            return False
        try:
            # The SDK's own parser: same acceptance as the SDK path
            # (a lone surrogate is an error, not a string).
            raw = pydantic_core.from_json(line)
        except ValueError:
            return False
        try:
            return fast.intercept(raw)
        except Exception:
            logger.exception("fast path failed on a message; the SDK server takes it")
            return False

    async def _deliver(self, line: bytes) -> None:
        """Parse one line for the SDK server; answer what it cannot take."""
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:
            reply = _error_for(line, exc)
            if reply is not None:
                await self.send_raw(reply)
            else:
                await self.read_writer.send(exc)
            return
        if isinstance(message, types.JSONRPCNotification) and _invalid_id(line):
            # A request whose id is not a string or an integer would pass
            # for a notification: refuse it (Invalid Request) instead.
            await self.send_raw(json.dumps(INVALID_ID).encode() + b"\n")
            return
        await self.read_writer.send(SessionMessage(message))

    def _encode(self, session_message: SessionMessage) -> bytes:
        if self.fast is not None:
            self.fast.outgoing(session_message.message)
        return session_message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"

    async def stdout_writer(self) -> None:
        encode = self._encode
        try:
            async with self.write_reader:
                async for session_message in self.write_reader:
                    # Under concurrency several answers are ready at once: one write (one
                    # syscall, one wake-up of the client) carries them all.
                    await self.send_raw(join_ready(session_message, self.write_reader, encode))
        except (anyio.ClosedResourceError, ConnectionError):
            await anyio.lowlevel.checkpoint()

    def stop_reading(self) -> None:
        if self.fast is not None:
            self.fast.close()
        if self.rtransport is not None:
            self.rtransport.close()

    def close(self) -> None:
        if self.rtransport is not None:
            self.rtransport.close()
        if self.out is not None:
            self.out.close()
