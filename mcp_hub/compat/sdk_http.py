"""The SDK's Streamable HTTP session manager and transport, opened up in one place.

The SDK's session manager has no public hooks for admitting, opening and
discarding sessions, and keeps its sessions in private tables; its transport
counts requests in flight and holds its streams privately. The hub needs all of
it (one session cap for the whole hub with eviction, resumable streams,
sessions rebuilt on any replica, the HTTP fast path, the replica bus).
:class:`HookedSessionManager` maps each private step to a public method that
subclasses override (and call ``super()`` on), and exposes the tables as
properties; the functions below read and hold the transport. Nothing else in
the hub touches these names (``tests/test_compat.py``), and the start-up check
(:mod:`mcp_hub.compat.hooks`) verifies each one exists with its expected shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

__all__ = ["HookedSessionManager", "holding", "negotiate_initialize", "read_stream_writer", "request_streams",
           "requests_in_flight", "transport_write_stream"]

_SDK = StreamableHTTPSessionManager


class HookedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with its internal steps under public names.

    Override :meth:`handle_stateful_request`, :meth:`admit_session`,
    :meth:`serve_opening_request` and :meth:`discard_session`; the SDK calls them
    where it calls its own private steps.
    """

    # ------------------------------------------------------------ the SDK's private steps
    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle_stateful_request(scope, receive, send)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        return self.admit_session(requestor)

    async def _serve_opening_request(self, http_transport: StreamableHTTPServerTransport,
                                     scope: Scope, receive: Receive, send: Send) -> None:
        await self.serve_opening_request(http_transport, scope, receive, send)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        await self.discard_session(session_id, transport)

    # ------------------------------------------------------------ public hooks (SDK defaults)
    async def handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request of a stateful session (new or known)."""
        await _SDK._handle_stateful_request(self, scope, receive, send)

    def admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        """A new session's transport, registered in :attr:`transports`; None refuses (503)."""
        return _SDK._admit_session(self, requestor)

    async def serve_opening_request(self, http_transport: StreamableHTTPServerTransport,
                                    scope: Scope, receive: Receive, send: Send) -> None:
        """Start a new session's server and serve the request that opened it."""
        await _SDK._serve_opening_request(self, http_transport, scope, receive, send)

    async def discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """End a session and forget it."""
        await _SDK._discard_session(self, session_id, transport)

    # ------------------------------------------------------------ the manager's tables
    @property
    def transports(self) -> dict[str, StreamableHTTPServerTransport]:
        """Live sessions' transports by session id."""
        return self._server_instances

    @property
    def owners(self) -> dict[str, AuthorizationContext]:
        """The credential that opened each session, by session id."""
        return self._session_owners

    @property
    def task_group(self) -> anyio.abc.TaskGroup | None:
        """The group the manager runs its sessions in (None before ``run``)."""
        group: anyio.abc.TaskGroup | None = self._task_group
        return group

    @property
    def creation_lock(self) -> anyio.Lock:
        """Held while a session is created."""
        return self._session_creation_lock

    @property
    def lifespan_state(self) -> Any:
        """The server's lifespan state while the manager runs, handed to each session."""
        return self._lifespan_state


def requests_in_flight(transport: StreamableHTTPServerTransport | None) -> int:
    """How many requests the transport counts as in flight (no idle expiry meanwhile)."""
    return int(getattr(transport, "_requests_in_flight", 0) or 0)


@contextmanager
def holding(transport: StreamableHTTPServerTransport | None) -> Iterator[None]:
    """Count a request as in flight, as the SDK transport does (no idle expiry meanwhile)."""
    idle = getattr(transport, "idle_scope", None)
    timeout = getattr(transport, "_idle_timeout", None)
    if transport is None or idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout


def request_streams(transport: StreamableHTTPServerTransport) -> dict[Any, Any]:
    """The transport's open response streams, by request id (``GET_STREAM_KEY`` for GET)."""
    streams: dict[Any, Any] = transport._request_streams
    return streams


def read_stream_writer(transport: StreamableHTTPServerTransport) -> Any:
    """Where the transport feeds incoming client messages to its server (None if closed)."""
    return transport._read_stream_writer


def transport_write_stream(transport: StreamableHTTPServerTransport) -> Any:
    """Where the server writes outgoing messages for the transport (None if closed)."""
    return transport._write_stream


def negotiate_initialize(params: dict[str, Any]) -> tuple[Any, str]:
    """(the client's ``initialize`` params, the protocol version) as the SDK's runner settles
    them for a new session: a session rebuilt on another replica from its sealed
    ``initialize`` gets the same answer its first replica gave."""
    return ServerRunner._negotiate_initialize(params)
