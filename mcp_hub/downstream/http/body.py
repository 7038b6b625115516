"""The one reader of a request body: bounded, read once, shared by every layer.

Several layers look at a POST body before the MCP transport does (the shape
guard, the drain guard, the HTTP fast path, the dropped-stream watcher, the
replica bus tap, the opener of a sealed session), and the SDK's transports read
it again. None of them reads the ASGI ``http.request`` messages itself:
:class:`BodyLimit`, right inside the sign-in guard, reads the body of every
request that has one (a ``Content-Length`` other than 0, or a
``Transfer-Encoding``) before anything else runs, counting bytes as they arrive.
Past ``[hub.http] max_body_bytes`` it answers ``413`` at once and the app never
runs; a ``Content-Length`` over the limit gets ``413`` before a byte is read.
Nothing else in the request changes that: a session id, a chunked body, a
missing or wrong length.

What was read is kept on the scope (:func:`request_body`), and the app's
``receive`` gives it back as one message before reading on (to the disconnect).
So a request holds its body once, at most the limit plus one read, however many
layers look at it. ``tests/security/test_body_reads.py`` checks that no module
reads a body any other way.
"""

from __future__ import annotations

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BODY_KEY", "BodyLimit", "request_body"]

#: The ASGI scope key holding the request's body, as read by :class:`BodyLimit`.
BODY_KEY = "mcp_hub.body"


class _TooLarge(Exception):
    """The body passed the limit while it was read."""


class BodyLimit:
    """Reads each request's body once, bounded by ``max_body`` bytes (see the module)."""

    def __init__(self, app: ASGIApp, *, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, has_body = _declared(scope["headers"])
        if not has_body:
            scope[BODY_KEY] = b""
            await self.app(scope, receive, send)
            return
        if declared is not None and declared > self.max_body:
            await _refuse(scope, receive, send)
            return
        try:
            body = await _read(receive, self.max_body)
        except _TooLarge:
            await _refuse(scope, receive, send)
            return
        if body is None:
            return  # the client left before its body ended: nobody to answer
        scope[BODY_KEY] = body
        await self.app(scope, _replay(body, receive), send)


def request_body(scope: Scope) -> bytes:
    """The body :class:`BodyLimit` read for this request (``b""`` for none).

    Raises ``LookupError`` when no :class:`BodyLimit` ran above the caller: a
    layer must never fall back to reading the body itself.
    """
    try:
        body: bytes = scope[BODY_KEY]
    except KeyError:
        raise LookupError("the request body was not read by BodyLimit") from None
    return body


def _declared(headers: list[tuple[bytes, bytes]]) -> tuple[int | None, bool]:
    """The declared ``Content-Length`` (None if absent), and whether the request has a body."""
    length: int | None = None
    chunked = False
    for name, value in headers:
        lowered = name.lower()
        if lowered == b"content-length":
            try:
                length = int(value)
            except ValueError:
                length = None
                chunked = True  # unparsable: read it and count what comes
        elif lowered == b"transfer-encoding":
            chunked = True
    return length, chunked or bool(length)


async def _read(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None on a disconnect; raises :class:`_TooLarge` past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        if chunk:
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _refuse(scope: Scope, receive: Receive, send: Send) -> None:
    await PlainTextResponse("Request body too large", status_code=413)(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` as one message, then reading on."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
