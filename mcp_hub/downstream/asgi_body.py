"""Reading a request body ahead of the app, and handing the app the same messages.

Three middlewares look at a POST body before the MCP transport does (the shape
guard, the drain guard and the dropped-stream watcher). Each reads the ASGI
``http.request`` messages, decides, then lets the app read them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.types import Message, Receive

__all__ = ["BufferedBody", "buffer_body"]


@dataclass
class BufferedBody:
    """What was read: the bytes, whether the body ended, and a ``receive`` replaying it."""

    body: bytes
    complete: bool
    receive: Receive


async def buffer_body(receive: Receive, *, limit: int | None = None) -> BufferedBody:
    """Read the body until its end, a disconnect, or more than ``limit`` bytes.

    The returned ``receive`` first gives back every message read here, then reads on.
    """
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    more = True
    while more:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        more = message.get("more_body", False)
        if limit is not None and size > limit:
            break
    complete = not more and (limit is None or size <= limit)

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return BufferedBody(b"".join(chunks), complete, replay)
