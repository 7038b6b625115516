"""The read stream from a stdio child: its stdout is read and parsed in the reading task.

A reader task feeding a memory stream cost every answer from the child an extra
hand-over between tasks (the reader's wake-up, then the session's) and the
task's bookkeeping. :class:`StdoutReadStream` is read by the SDK session's own
receive loop: it waits for the next chunk of stdout itself and hands out the
messages parsed from it, in order. Back-pressure is unchanged (nothing is read
while the session is not receiving), and so is the end of the stream:

* when the child's stdout closes, ``on_eof`` is called (so the owner tears the
  session down at once) and the session gets ``EndOfStream``;
* :meth:`end` (the write side found the pipe broken) ends the stream at once,
  waking a receive that is waiting for output;
* after :meth:`close` (the session is done with it) a receive raises
  ``ClosedResourceError``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic_core import from_json

__all__ = ["StdoutReadStream", "plain_response"]

T = TypeVar("T")

_EOF_ERRORS = (StopAsyncIteration, anyio.EndOfStream, anyio.ClosedResourceError,
               anyio.BrokenResourceError, OSError)


class StdoutReadStream(Generic[T]):
    """A read stream (``receive``, async iteration, ``aclose``) over a child's stdout."""

    def __init__(self, stdout: AsyncIterator[bytes], parse: Callable[[bytes], list[T]],
                 on_eof: Callable[[], None]) -> None:
        self._chunks = stdout
        self._parse = parse
        self._on_eof = on_eof
        self._items: deque[T] = deque()
        self._ended = False
        self._closed = False
        self._waiting: anyio.CancelScope | None = None

    async def receive(self) -> T:
        while not self._items:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._ended:
                raise anyio.EndOfStream
            chunk: bytes | None = None
            with anyio.CancelScope() as self._waiting:  # end() and close() cancel the wait
                try:
                    chunk = await self._chunks.__anext__()
                except _EOF_ERRORS:
                    self._eof()
                    raise anyio.EndOfStream from None
                finally:
                    self._waiting = None
            if chunk is None or self._ended or self._closed:
                continue  # ended meanwhile: what was read goes nowhere, as before
            self._items.extend(self._parse(chunk))
        return self._items.popleft()

    def _eof(self) -> None:
        if not self._ended:
            self._ended = True
            self._on_eof()

    def end(self) -> None:
        """End the stream now (no more messages will be read); the owner hears of it."""
        self._eof()
        self._wake()

    def close(self) -> None:
        self._closed = True
        self._wake()

    def _wake(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()

    async def aclose(self) -> None:
        self.close()

    def __aiter__(self) -> StdoutReadStream[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> StdoutReadStream[T]:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


def plain_response(line: bytes) -> SessionMessage | None:
    """A line that is exactly ``{"jsonrpc": "2.0", "id": …, "result": {…}}``, as a message,
    without the validation of the JSON-RPC message union; None for anything else.

    Most of what an upstream writes is the answer to a call, and for it the union's
    validation checks only what is checked here (the version, an int or string id,
    an object result, no other keys). Every other line, valid or not, takes the full
    validation and its error handling.
    """
    try:
        value = from_json(line)
    except ValueError:
        return None
    if type(value) is not dict or len(value) != 3 or value.get("jsonrpc") != "2.0":
        return None
    result, request_id = value.get("result"), value.get("id")
    if type(result) is not dict or type(request_id) not in (int, str):
        return None
    return SessionMessage(types.JSONRPCResponse.model_construct(
        jsonrpc="2.0", id=request_id, result=result))
