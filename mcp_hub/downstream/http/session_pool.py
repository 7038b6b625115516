"""One pool of Streamable HTTP (and SSE) sessions across every endpoint of the hub.

The SDK's session manager caps sessions per manager, answers 503 at the cap and
never evicts, so clients that vanish without a DELETE lock everyone out for the
idle timeout, and every profile endpoint adds a cap of its own. Here:

* one :class:`SessionPool` holds every stateful session of ``/mcp`` and every
  ``/p/NAME/mcp``, plus every open SSE stream, under one ``max_sessions``;
* a session that only sent ``initialize`` (no request since) closes after
  ``session_init_timeout`` seconds instead of the full idle timeout;
* at the cap, the least recently used session with no request in flight is
  evicted; its id then answers 404 and its client re-initializes, as the spec
  allows. Only when every session is busy does a new client get 503;
* :meth:`SessionPool.describe` lists every live session for the status page
  (ids shortened: a session id is not for display).

:class:`PooledSessionManager` is the SDK's manager with admission, use and
discard routed through the pool. It overrides the manager's internal steps
(``_admit_session``, ``_serve_opening_request``, ``_discard_session``) and reads
the transport's in-flight count; the SDK has no public hooks for these, so
``tests/security/test_session_cap.py`` pins the behaviour across SDK updates.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from starlette.types import Receive, Scope, Send

from mcp_hub.compat.sdk_http import HookedSessionManager, requests_in_flight

__all__ = ["PooledSessionManager", "SessionPool"]

logger = logging.getLogger(__name__)

_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")


@dataclass
class _Session:
    manager: PooledSessionManager | None
    transport: StreamableHTTPServerTransport | None
    endpoint: str
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    requests: int = 1

    @property
    def busy(self) -> bool:
        if self.transport is None:
            return True  # an SSE stream is one long request
        return bool(requests_in_flight(self.transport))


class SessionPool:
    """Every live session of the hub, in least-recently-used order."""

    def __init__(self, max_sessions: int, init_timeout: float) -> None:
        self.max_sessions = max_sessions
        self.init_timeout = init_timeout
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self.evicted = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def add(self, sid: str, endpoint: str, manager: PooledSessionManager | None = None,
            transport: StreamableHTTPServerTransport | None = None) -> None:
        self._sessions[sid] = _Session(manager, transport, endpoint)

    def touch(self, sid: str) -> None:
        entry = self._sessions.get(sid)
        if entry is not None:
            entry.last_used = time.time()
            entry.requests += 1
            self._sessions.move_to_end(sid)

    def only_opened(self, sid: str) -> bool:
        """Whether ``sid`` is live and has seen no request after the one that opened it."""
        entry = self._sessions.get(sid)
        return entry is not None and entry.requests == 1

    def forget(self, sid: str) -> None:
        self._sessions.pop(sid, None)

    def make_room(self) -> bool:
        """Below the cap, or made so by evicting the LRU idle session; False if all are busy."""
        if len(self._sessions) < self.max_sessions:
            return True
        for sid, entry in self._sessions.items():
            if entry.manager is not None and not entry.busy:
                self._sessions.pop(sid)
                entry.manager.evict(sid)
                self.evicted += 1
                logger.info("session cap (%d) reached: evicted the least recently used idle "
                            "session of %s", self.max_sessions, entry.endpoint)
                return True
        self.refused += 1
        return False

    def describe(self) -> dict[str, Any]:
        """Every live session, for status: short id, endpoint, state, age, idle time."""
        now = time.time()
        sessions = [
            {
                "id": sid[:8],
                "endpoint": e.endpoint,
                "state": "stream" if e.transport is None else (
                    "active" if e.requests > 1 else "initializing"),
                "requests": e.requests,
                "busy": e.busy,
                "age_seconds": round(now - e.created, 1),
                "idle_seconds": round(now - e.last_used, 1),
            }
            for sid, e in reversed(self._sessions.items())
        ]
        return {"count": len(sessions), "max": self.max_sessions, "evicted": self.evicted,
                "refused": self.refused, "sessions": sessions}


class PooledSessionManager(HookedSessionManager):
    """The SDK's session manager, with its sessions kept in a shared :class:`SessionPool`."""

    def __init__(self, app: Any, *, pool: SessionPool, endpoint: str, **kwargs: Any) -> None:
        super().__init__(app, max_sessions=None, **kwargs)
        self.pool = pool
        self.endpoint = endpoint

    async def handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k == _HEADER), None)
        if sid is not None and sid in self.transports and self._owned_by(sid, scope):
            self.pool.touch(sid)  # only the owner's request counts as a use
        await super().handle_stateful_request(scope, receive, send)

    def _owned_by(self, sid: str, scope: Scope) -> bool:
        """Whether the request behind ``scope`` is of the identity that opened ``sid``."""
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        return requestor == self.owners.get(sid)

    def admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        if not self.pool.make_room():
            return None
        transport = super().admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.pool.add(transport.mcp_session_id, self.endpoint, self, transport)
        return transport

    async def serve_opening_request(self, http_transport: StreamableHTTPServerTransport,
                                     scope: Scope, receive: Receive, send: Send) -> None:
        await super().serve_opening_request(http_transport, scope, receive, send)
        # A session that has seen only its initialize gets a short lease; the next
        # request (notifications/initialized, normally at once) restores the full one.
        idle = http_transport.idle_scope
        sid = http_transport.mcp_session_id
        if (idle is not None and sid is not None and self.pool.only_opened(sid)
                and not requests_in_flight(http_transport)):
            idle.deadline = min(idle.deadline, anyio.current_time() + self.pool.init_timeout)

    async def discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.pool.forget(session_id)
        await super().discard_session(session_id, transport)

    def evict(self, sid: str) -> None:
        """Forget ``sid`` now (it answers 404 from here on) and end it in the background."""
        transport = self.transports.pop(sid, None)
        self.owners.pop(sid, None)
        if transport is not None and self.task_group is not None:
            self.task_group.start_soon(self.discard_session, sid, transport)
