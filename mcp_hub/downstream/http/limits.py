"""Connection-level limits of the HTTP listener, enforced inside uvicorn's httptools protocol.

uvicorn's httptools protocol reads request headers without bound: any number,
of any size, as slowly as the client likes. The hub serves through a subclass
that keeps httptools' speed and adds, per connection:

* **header size** — at most ``max_header_bytes`` from the request line to the
  blank line; more is answered ``431`` and the connection is closed. The parser
  is fed a request head's bytes only up to the limit: a head that has not ended
  by then is over it, however the bytes arrive (the whole head in one read, one
  byte per read, or a read that also holds the start of the body), and memory
  stays bounded by the limit plus one read. A request pipelined behind another
  in the same read is measured once its head is parsed;
* **header count** — at most ``max_headers`` header lines (``431``);
* **header read timeout** — a new connection, and each request after a
  keep-alive pause, must deliver its complete headers within ``header_timeout``
  seconds, however slowly it trickles (``408``, then close): slowloris ends here;
* **body idle timeout** — while a request body is being received, no gap longer
  than ``body_timeout`` seconds (the connection is closed);
* **keep-alive timeout** — an idle connection between requests closes after
  ``keep_alive_timeout`` seconds (uvicorn's own timer, configured here);
* **per-IP cap before authentication** — at most ``max_connections_per_ip``
  connections from one address that have not yet carried a request through the
  guards (Host, Origin, bearer token). A connection that has is no longer
  counted, so authenticated clients are never limited by it. Over the cap the
  connection gets ``503`` and is closed before any of its bytes are parsed.

The guard middleware marks a connection as admitted through
:data:`SCOPE_KEY` in the ASGI scope.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from mcp_hub.downstream.http.writes import CoalescingTransport

__all__ = ["SCOPE_KEY", "ConnectionLimits", "admit_connection", "limited_protocol"]

logger = logging.getLogger(__name__)

#: How long a refused connection's further input is read and dropped before closing.
_LINGER_SECONDS = 2.0

#: The ASGI scope key under which the protocol hands the guard its connection.
SCOPE_KEY = "mcp_hub.connection"


@dataclass
class ConnectionLimits:
    """The limits, plus the per-IP counts shared by every connection of one listener."""

    max_header_bytes: int = 32 * 1024
    max_headers: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    max_connections_per_ip: int = 64
    unadmitted: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=lambda: {"431": 0, "408": 0, "per_ip": 0})

    @classmethod
    def from_config(cls, http: Any) -> ConnectionLimits:
        return cls(
            max_header_bytes=http.max_header_bytes, max_headers=http.max_headers,
            header_timeout=http.header_timeout, body_timeout=http.body_timeout,
            keep_alive_timeout=http.keep_alive_timeout,
            max_connections_per_ip=http.max_connections_per_ip,
        )


def _response(status: bytes, text: bytes) -> bytes:
    return (b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: " + str(len(text)).encode() + b"\r\nconnection: close\r\n\r\n" + text)


_TOO_LARGE = _response(b"431 Request Header Fields Too Large", b"Request header fields too large")
_TIMEOUT = _response(b"408 Request Timeout", b"Request headers not received in time")
_BUSY = _response(b"503 Service Unavailable", b"Too many connections from this address")


_HEADERS, _BODY = 1, 2


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of :class:`ConnectionLimits`.

    Timeouts cost no timer per request: a phase (headers, body) sets a deadline,
    and one lazily re-armed watchdog per connection checks it when it fires.
    """

    limits: ConnectionLimits = ConnectionLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn types it as int; a float works with call_later and allows short test values.
        self.timeout_keep_alive = cast(int, self.limits.keep_alive_timeout)
        self._ip: str | None = None
        self._counted = False
        self._in_headers = True
        self._header_bytes = 0
        self._begun = False  # a request has begun and not yet ended
        self._fresh = False  # a request beginning now starts within bytes counted for it
        self._exact = True  # the current request's head was counted as its bytes arrived
        self._refused = False
        self._phase = 0  # _HEADERS, _BODY or 0 (no deadline)
        self._deadline = 0.0
        self._watchdog: asyncio.TimerHandle | None = None

    # -- connection ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # One write per loop turn: a JSON answer's headers and body in one segment.
        super().connection_made(cast(asyncio.Transport, CoalescingTransport(transport, self.loop, self)))
        limits = self.limits
        self._ip = self.client[0] if self.client else None
        if self._ip is not None:
            count = limits.unadmitted.get(self._ip, 0)
            if count >= limits.max_connections_per_ip:
                limits.refused["per_ip"] += 1
                logger.warning("refused a connection from %s: %d connections not yet past "
                               "authentication", self._ip, count)
                self._refuse(_BUSY)
                return
            limits.unadmitted[self._ip] = count + 1
            self._counted = True
        self._expect(_HEADERS, limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        self._phase = 0
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        super().connection_lost(exc)

    def admitted(self) -> None:
        """The guards let a request of this connection through: stop counting it per IP."""
        self._uncount()

    def _uncount(self) -> None:
        if self._counted and self._ip is not None:
            self._counted = False
            left = self.limits.unadmitted.get(self._ip, 1) - 1
            if left > 0:
                self.limits.unadmitted[self._ip] = left
            else:
                self.limits.unadmitted.pop(self._ip, None)

    def _refuse(self, response: bytes) -> None:
        """Answer and close. The close lingers: the rest of what the client is still
        sending is read and dropped for a moment, so the answer is not lost to a TCP
        reset (closing a socket with unread input resets it), as web servers do."""
        self._refused = True
        self._phase = 0
        transport = self.transport
        if transport.is_closing():
            return
        transport.write(response)
        if transport.can_write_eof():
            transport.write_eof()
            self.loop.call_later(_LINGER_SECONDS, transport.close)
        else:
            transport.close()

    # -- deadlines ----------------------------------------------------------------------------
    def _expect(self, phase: int, seconds: float) -> None:
        """Start ``phase``, which must end within ``seconds``."""
        self._phase = phase
        self._deadline = self.loop.time() + seconds
        if self._watchdog is None:
            self._watchdog = self.loop.call_at(self._deadline, self._check)

    def _check(self) -> None:
        self._watchdog = None
        if not self._phase or self._refused or self.transport.is_closing():
            return
        if self.loop.time() < self._deadline:
            self._watchdog = self.loop.call_at(self._deadline, self._check)
            return
        if self._phase == _HEADERS:
            self.limits.refused["408"] += 1
            self._refuse(_TIMEOUT)
        else:
            logger.info("closed a connection whose request body stalled for %.0f s",
                        self.limits.body_timeout)
            self._phase = 0
            self.transport.close()

    # -- parsing ------------------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        rest: bytes | memoryview = data
        while rest and not self._refused and not self.transport.is_closing():
            if not self._in_headers:
                self._fresh = False  # a request that starts after this body is not counted whole
                self._feed(rest)
                return
            rest = self._feed_head(rest)

    def _feed_head(self, data: bytes | memoryview) -> bytes | memoryview:
        """Feed the parser a request head's bytes, at most up to the limit; return the rest.

        The parser never sees more head bytes than the limit allows: given them
        all without reaching the head's end, the head is over the limit (``431``),
        however the bytes were split into reads, and whether or not a read also
        holds the start of the body. Bytes after the head's end are returned.
        """
        if self._phase != _HEADERS:
            # A request after a keep-alive pause: its header clock starts now.
            self._expect(_HEADERS, self.limits.header_timeout)
        if not self._begun:
            self._fresh = True  # the request starts within what is counted from here
        room = self.limits.max_header_bytes - self._header_bytes
        piece = data if len(data) <= room else memoryview(data)[:room]
        self._header_bytes += len(piece)
        self._feed(piece)
        if self._refused or self.transport.is_closing():
            return b""
        if self._in_headers and (self._header_bytes >= self.limits.max_header_bytes or (
                self.headers is not None and len(self.headers) > self.limits.max_headers)):
            self._too_large()
            return b""
        return memoryview(data)[len(piece):] if len(piece) < len(data) else b""

    def _feed(self, data: bytes | memoryview) -> None:
        # httptools reads any buffer; uvicorn's data_received only passes it on.
        super().data_received(cast(bytes, data))

    def _too_large(self) -> None:
        self.limits.refused["431"] += 1
        self._refuse(_TOO_LARGE)

    def _head_size(self) -> int:
        """The size of the parsed request head (request line, headers, blank line)."""
        line = len(self.parser.get_method()) + 1 + len(self.url) + len(b" HTTP/1.1\r\n")
        return line + sum(len(name) + len(value) + 4 for name, value in self.headers) + 2

    def on_message_begin(self) -> None:
        self._in_headers = True
        self._begun = True
        # A request that began in the middle of bytes counted for the one before it
        # (pipelined): its head is measured once parsed, in on_headers_complete.
        self._exact = self._fresh
        self._fresh = False
        super().on_message_begin()
        cast(dict[str, Any], self.scope)[SCOPE_KEY] = self

    def on_headers_complete(self) -> None:
        if self._refused:
            return
        limits = self.limits
        if len(self.headers) > limits.max_headers or (
                not self._exact and self._head_size() > limits.max_header_bytes):
            self._too_large()
            return
        self._in_headers = False
        self._header_bytes = 0
        self._expect(_BODY, limits.body_timeout)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        self._deadline = self.loop.time() + self.limits.body_timeout
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._phase = 0
        self._in_headers = True
        self._begun = False
        super().on_message_complete()


def limited_protocol(limits: ConnectionLimits) -> type[LimitedHttpToolsProtocol]:
    """A protocol class bound to one listener's limits (uvicorn instantiates it per connection)."""
    return type("HubHttpProtocol", (LimitedHttpToolsProtocol,), {"limits": limits})


def admit_connection(scope: Any) -> None:
    """Called by the guard for a request that passed it: its connection stops counting per IP."""
    conn = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if conn is not None:
        conn.admitted()


def connection_offloads(scope: Any) -> bool:
    """Whether this request's connection sends large answers from the bulk writer's thread.

    Such an answer is best sent whole: the thread writes it in turns of its own, so
    it needs neither pieces nor a turn among the other large answers.
    """
    conn = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    return bool(getattr(getattr(conn, "transport", None), "offloads", False))

