"""An upstream that closes a call's stream mid-call (SSE polling, SEP-1699), told to the call.

A Streamable HTTP server of the 2025-11-25 revision may end a call's POST
response stream before the answer, after a priming event (an event id and
``retry``): the client is to come back with ``GET`` and ``Last-Event-ID`` and
receive the answer there. The SDK client does that by itself (after waiting the
``retry`` the server asked for), so a call through the hub still gets its
answer when the upstream kept it; but the hub's own client kept its stream open
the whole time, and never saw the polling the upstream asked for.

The SDK client tells nobody that a stream ended early, but two public hooks say
it together:

* a request's ``ClientMessageMetadata.on_resumption_token_update`` is called
  with the id of every event of that request's stream (its priming event
  first): the call's resumption cursor;
* the ``httpx`` client the hub gives the SDK runs its ``request`` event hooks
  for every request, the SDK's resuming ``GET`` included, whose
  ``Last-Event-ID`` is that cursor.

So the rule: **a GET that resumes from a call's cursor means the upstream
closed that call's stream before its answer.** :class:`StreamPolls` (one per
upstream connection) keeps the cursors of the calls in flight and, at that GET,
awaits the call's ``upstream_closed_stream()`` (the downstream call context,
which closes its client's stream in turn) before the GET leaves — so the
client's stream is closed before the upstream's answer can arrive (``retry``
after the upstream closed its own, since the SDK waits that long). The GET
that keeps the upstream's standalone stream alive resumes from a cursor of no
call and changes nothing.

Each connection's registry is found by the stream the SDK client writes its
requests to (:func:`watch`, :func:`polls_of`): the one object both the
transport's opener and the lean call hold. Only the lean ``tools/call``
(:mod:`mcp_hub.upstream.lean_call`) passes the callback; other requests are not
told (their answers still arrive, through the SDK's own resumption).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import httpx2

__all__ = ["CallCursor", "StreamPolls", "call_cursor", "polls_of", "watch"]

logger = logging.getLogger(__name__)

#: The longest the upstream's resuming GET waits for the client's stream to be closed.
CLOSE_WAIT = 2.0

#: The registry of each watched connection, by the id of its write stream (while it is open).
_BY_STREAM: dict[int, tuple[Any, StreamPolls]] = {}


class StreamPolls:
    """The resumption cursors of one upstream connection's calls in flight."""

    def __init__(self) -> None:
        self._cursors: dict[str, CallCursor] = {}

    def __len__(self) -> int:
        return len(self._cursors)

    async def on_request(self, request: httpx2.Request) -> None:
        """The ``httpx`` request hook: a GET resuming a call's cursor tells that call."""
        if request.method != "GET":
            return
        cursor = request.headers.get("last-event-id")
        call = self._cursors.pop(cursor, None) if cursor else None
        if call is not None:
            await call.closed()

    def note(self, call: CallCursor, cursor: str) -> None:
        if call.cursor is not None and self._cursors.get(call.cursor) is call:
            del self._cursors[call.cursor]
        call.cursor = cursor
        self._cursors[cursor] = call

    def forget(self, call: CallCursor) -> None:
        if call.cursor is not None and self._cursors.get(call.cursor) is call:
            del self._cursors[call.cursor]


@contextlib.contextmanager
def watch(write_stream: Any, polls: StreamPolls) -> Iterator[None]:
    """While the connection is open, calls written to ``write_stream`` use ``polls``."""
    _BY_STREAM[id(write_stream)] = (write_stream, polls)
    try:
        yield
    finally:
        _BY_STREAM.pop(id(write_stream), None)


def polls_of(write_stream: Any) -> StreamPolls | None:
    """The registry of the connection that writes to ``write_stream``, if it is watched."""
    found = _BY_STREAM.get(id(write_stream))
    return found[1] if found is not None and found[0] is write_stream else None


class CallCursor:
    """One call's ``on_resumption_token_update``: keeps its latest cursor registered."""

    __slots__ = ("_on_closed", "cursor", "polls")

    def __init__(self, on_closed: Callable[[], Awaitable[None]]) -> None:
        self._on_closed = on_closed
        #: The registry of the call's connection (set before the request is written).
        self.polls: StreamPolls | None = None
        self.cursor: str | None = None

    async def __call__(self, cursor: str) -> None:
        if self.polls is not None:
            self.polls.note(self, cursor)

    async def closed(self) -> None:
        """The upstream closed this call's stream: tell the call, within ``CLOSE_WAIT``."""
        with anyio.move_on_after(CLOSE_WAIT):
            try:
                await self._on_closed()
            except Exception:  # the client's side is best effort; the call goes on
                logger.debug("closing the client's stream of a polled call failed", exc_info=True)

    def done(self) -> None:
        """The call ended: its cursor is no longer watched."""
        if self.polls is not None:
            self.polls.forget(self)


def call_cursor(call: Any) -> CallCursor | None:
    """The cursor callback of a call whose context can close its client's stream, else None."""
    closed = getattr(call, "upstream_closed_stream", None)
    return CallCursor(closed) if callable(closed) else None
