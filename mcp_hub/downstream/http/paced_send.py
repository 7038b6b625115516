"""A large HTTP answer leaves in pieces, with a turn of the event loop between two.

A ``tools/list`` answer of a large catalog is one or two megabytes. Handed to
the server in one ``http.response.body`` message, it is copied and written in
one turn of the event loop, and after a ``list_changed`` twenty clients
re-listing at once make twenty such turns in a row: every call in flight waits
behind them. :func:`paced` wraps an ASGI ``send`` so that a body larger than
``WRITE_CHUNK`` is sent as several ``http.response.body`` messages
(``more_body``), with a checkpoint after each, so the calls that arrived
meanwhile are read and answered between two pieces. The response's
``content-length`` is already set, so the bytes on the wire are unchanged: the
same headers, the same body, only written in several ``send`` system calls.
"""

from __future__ import annotations

import anyio.lowlevel
from starlette.types import Message, Send

from mcp_hub.plumbing.pipes import WRITE_CHUNK

__all__ = ["WRITE_CHUNK", "paced"]


def paced(send: Send, chunk: int = WRITE_CHUNK) -> Send:
    """``send``, with every body larger than ``chunk`` bytes sent in pieces of ``chunk``."""

    async def send_paced(message: Message) -> None:
        body = message.get("body", b"")
        if message["type"] != "http.response.body" or len(body) <= chunk:
            await send(message)
            return
        more = bool(message.get("more_body", False))
        view = memoryview(body)
        for start in range(0, len(body), chunk):
            last = start + chunk >= len(body)
            await send({"type": "http.response.body", "body": bytes(view[start:start + chunk]),
                        "more_body": more or not last})
            if not last:
                await anyio.lowlevel.checkpoint()

    return send_paced
