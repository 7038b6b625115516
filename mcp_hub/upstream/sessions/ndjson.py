"""An upstream's POST answer written as newline-delimited JSON, read as the messages it holds.

The SDK's Streamable HTTP client reads an ``application/json`` answer as one
JSON-RPC message once the body has ended. Some servers write an answer under
that content type as one JSON message a line: their ``subscriptions/listen``
stream (the acknowledgement, then each event, the body kept open), and the
answer to a ``tools/call`` or any other request (its notifications, the
requests they ask the client, then the result). Read as one message, the
listen stream is never acknowledged, and the call fails with "Error parsing
JSON response", what the server sent dropped.

:func:`ndjson_hook` is a response hook for the upstream's HTTP client (public
``httpx`` API only). For a POST answer that is ``application/json`` and whose
first line is a JSON value on its own, it hands the SDK the same messages as a
``text/event-stream``, one event per line, in order, as each line arrives: the
notifications and requests reach the session as if they had come on an SSE
stream, and the answer's result (or error) ends the request. An answer that is
one JSON document (ended without a newline, or whose first line is not JSON by
itself, as in a pretty-printed error) passes through as it came; for any
request but listen it is read as before, without a size limit of the hub's.
Within a stream, a line that is not JSON is logged under the server's name
and skipped; the stream goes on. A line longer than the server's
``max_message_bytes`` is not kept: it is logged and the stream ends with an
error for its request (nothing is lost silently); a listen loop then opens a
new stream and re-reads every list.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx2

__all__ = ["LISTEN_METHOD", "ndjson_hook"]

logger = logging.getLogger("mcp_hub.upstream")

LISTEN_METHOD = "subscriptions/listen"
_LISTEN_BYTES = b'"subscriptions/listen"'
_SHOWN = 200
_INTERNAL_ERROR = -32603


class _Oversized:
    """A line over the limit: only its size is kept."""

    __slots__ = ("size",)

    def __init__(self, size: int) -> None:
        self.size = size


class _Splitter:
    """Cut bytes into lines, refusing to hold a line over ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        """The whole lines ``chunk`` completes; an :class:`_Oversized` ends the list.

        Only the new bytes are searched for a newline (what is held has none), so a
        long line arriving in small pieces costs time linear in its size."""
        held = len(self.buffer)
        self.buffer += chunk
        lines: list[bytes | _Oversized] = []
        start = 0
        while (nl := self.buffer.find(b"\n", max(start, held))) >= 0:
            if nl - start > self.limit:
                return [*lines, _Oversized(nl - start)]
            lines.append(bytes(self.buffer[start:nl]))
            start = nl + 1
        del self.buffer[:start]
        if len(self.buffer) > self.limit:
            lines.append(_Oversized(len(self.buffer)))
        return lines

    def rest(self) -> bytes:
        """What is left after the last newline (the body has ended)."""
        rest, self.buffer = bytes(self.buffer), bytearray()
        return rest


class _Body(httpx2.AsyncByteStream):
    """A response body made of ``parts``; closing it closes the upstream's body."""

    def __init__(self, parts: AsyncIterator[bytes], close: Callable[[], Awaitable[None]]) -> None:
        self._parts = parts
        self._close = close

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._parts:
            yield part

    async def aclose(self) -> None:
        await self._close()


def _listen_id(request: httpx2.Request) -> int | str | None:
    """The id of a ``subscriptions/listen`` request; None for any other request."""
    try:
        content = request.content
    except httpx2.RequestNotRead:
        return None
    if _LISTEN_BYTES not in content:  # the cheap test first: this runs on every answer
        return None
    try:
        body: Any = json.loads(content)
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("method") != LISTEN_METHOD:
        return None
    request_id = body.get("id")
    return request_id if isinstance(request_id, int | str) else None


def _request_of(request: httpx2.Request) -> tuple[int | str, str] | None:
    """The id and method of the request ``request`` carries; None if it carries none."""
    try:
        body: Any = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    if not isinstance(body, dict):
        return None
    request_id, method = body.get("id"), body.get("method")
    if not isinstance(request_id, int | str) or not isinstance(method, str):
        return None
    return request_id, method


def _json_line(line: bytes) -> bytes | None:
    """``line`` as one SSE-safe JSON text, or None if it is not JSON."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    if b"\r" in line:  # JSON whitespace an event's data line cannot carry
        return json.dumps(value, separators=(",", ":")).encode()
    return line


def _event(data: bytes) -> bytes:
    return b"data: " + data + b"\n\n"


class _Reader:
    """One answer of one server, turned into events line by line.

    ``method`` is the request's: the logs name the listen stream, or the answer."""

    def __init__(self, server: str, limit: int, request_id: int | str,
                 method: str = LISTEN_METHOD) -> None:
        self.server = server
        self.limit = limit
        self.request_id = request_id
        self.where = ("its listen stream" if method == LISTEN_METHOD
                      else f"its answer to {method}")
        self.then = ("the stream is opened again" if method == LISTEN_METHOD
                     else "the request fails")
        self.splitter = _Splitter(limit)
        self.over = False

    def events(self, lines: list[bytes | _Oversized]) -> list[bytes]:
        """The events of whole lines; after an oversized line, only its error."""
        out: list[bytes] = []
        for line in lines:
            if isinstance(line, _Oversized):
                out.append(self._refuse(line.size))
                break
            if not line.strip():
                continue
            data = _json_line(line.strip())
            if data is None:
                logger.warning("[%s] upstream sent a line that is not JSON on %s; "
                               "skipped: %r", self.server, self.where, line[:_SHOWN],
                               extra={"server": self.server})
                continue
            out.append(_event(data))
        return out

    def _refuse(self, size: int) -> bytes:
        self.over = True
        logger.warning("[%s] upstream sent a %d-byte message on %s, over "
                       "max_message_bytes (%d); dropped, %s", self.server, size,
                       self.where, self.limit, self.then, extra={"server": self.server})
        message = (f"the server's message of {size / 1048576:.1f} MB exceeds "
                   f"max_message_bytes ({self.limit / 1048576:g} MB); it was dropped")
        error = {"jsonrpc": "2.0", "id": self.request_id,
                 "error": {"code": _INTERNAL_ERROR, "message": message}}
        return _event(json.dumps(error).encode())

    async def stream(self, first: list[bytes | _Oversized],
                     chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """Every event, as the lines arrive."""
        for event in self.events(first):
            yield event
        if self.over:
            return
        async for chunk in chunks:
            for event in self.events(self.splitter.feed(chunk)):
                yield event
            if self.over:
                return
        for event in self.events([self.splitter.rest()]):
            yield event


async def _replay(head: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield head
    async for chunk in chunks:
        yield chunk


async def _events(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


async def _first_lines(reader: _Reader, chunks: AsyncIterator[bytes]
                       ) -> tuple[list[bytes | _Oversized], bool]:
    """Read until a line that is not blank (or the body's end); True if the body ended."""
    async for chunk in chunks:
        lines = reader.splitter.feed(chunk)
        if any(isinstance(line, _Oversized) or line.strip() for line in lines):
            return lines, False
    return [], True


async def _until_a_line(chunks: AsyncIterator[bytes]) -> tuple[bytes, int]:
    """Read until a newline that ends a line not blank: what was read and where that
    newline is (-1 if the body ended first). Not bounded: one document is read whole,
    as the SDK reads it; a body in one piece is not copied."""
    parts: list[bytes] = []
    size = 0
    blank = True  # the line being read holds only whitespace so far
    async for chunk in chunks:
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            if not blank or chunk[start:nl].strip():
                parts.append(chunk)
                return b"".join(parts), size + nl
            start = nl + 1
        blank = blank and not chunk[start:].strip()
        parts.append(chunk)
        size += len(chunk)
    return b"".join(parts), -1


async def _any_answer(server: str, limit: int, request: httpx2.Request, held: bytes, nl: int,
                      chunks: AsyncIterator[bytes]) -> tuple[AsyncIterator[bytes], bool]:
    """The body the SDK reads for the answer to any request but listen, ``held`` read up
    to the end of its first line (at ``nl``); True if its messages are events."""
    request_of = _request_of(request)
    if request_of is None or _json_line(held[:nl].strip()) is None:
        return _replay(held, chunks), False  # one (pretty-printed) document
    reader = _Reader(server, limit, *request_of)
    return reader.stream(reader.splitter.feed(held), chunks), True


async def _listen_answer(reader: _Reader, chunks: AsyncIterator[bytes]
                         ) -> tuple[AsyncIterator[bytes], bool]:
    """The body the SDK reads for a listen answer; True if its messages are events.
    A first line over the limit fails the stream at once."""
    first, ended = await _first_lines(reader, chunks)
    if ended:  # one JSON document, as the SDK reads it
        return _events([reader.splitter.rest()]), False
    if isinstance(first[-1], _Oversized) or _json_line(_first_text(first)) is not None:
        return reader.stream(first, chunks), True
    # the first line is not JSON by itself: one (pretty-printed) document
    head = b"\n".join(line for line in first if isinstance(line, bytes)) + b"\n"
    return _replay(head + reader.splitter.rest(), chunks), False


def ndjson_hook(server: str, limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook reading server ``server``'s POST answers written as NDJSON
    (the module docstring); ``limit`` is its ``max_message_bytes``."""

    async def hook(response: httpx2.Response) -> None:
        if response.status_code != 200 or response.request.method != "POST":
            return
        if response.is_stream_consumed:  # read already (not off the network): nothing streams
            return
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return
        chunks, close = _decoded(response)
        listen_id = _listen_id(response.request)
        if listen_id is not None:
            parts, lines = await _listen_answer(_Reader(server, limit, listen_id), chunks)
        else:
            held, nl = await _until_a_line(chunks)
            if nl < 0:  # the body ended: one document, the common answer, as it came
                await close()
                response.stream = httpx2.ByteStream(held)
                return
            parts, lines = await _any_answer(server, limit, response.request, held, nl, chunks)
        if lines:
            response.headers.pop("content-length", None)
            response.headers["content-type"] = "text/event-stream"
        response.stream = _Body(parts, close)

    return hook


def _decoded(response: httpx2.Response
             ) -> tuple[AsyncIterator[bytes], Callable[[], Awaitable[None]]]:
    """The answer's body, decoded, and what closes it.

    Without a content-encoding the bytes off the network are the body; otherwise a
    shadow of the answer decodes them, and the answer loses the encoding's headers."""
    stream = response.stream
    if "content-encoding" not in response.headers and isinstance(stream, httpx2.AsyncByteStream):
        return aiter(stream), stream.aclose
    source = httpx2.Response(response.status_code, headers=response.headers,
                             stream=stream, request=response.request)
    for name in ("content-encoding", "content-length"):
        response.headers.pop(name, None)
    return source.aiter_bytes(), source.aclose


def _first_text(lines: list[bytes | _Oversized]) -> bytes:
    """The first line that is not blank, stripped (:func:`_first_lines` stopped at it)."""
    for line in lines:
        if isinstance(line, bytes) and line.strip():
            return line.strip()
    return b""
