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

:class:`PoolAdmission` is one endpoint's part of the pool: the session manager
(:mod:`~mcp_hub.downstream.http.session_manager`) calls it on admission, use,
the opening request and discard. It reads the transport's in-flight count
through the compat door; ``tests/security/test_session_cap.py`` pins the
behaviour across SDK updates.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.streamable_http import StreamableHTTPServerTransport
from starlette.types import Scope

from mcp_hub.compat.sdk_http import requests_in_flight

__all__ = ["Evictable", "PoolAdmission", "SessionPool"]

logger = logging.getLogger(__name__)

class Evictable(Protocol):
    """A session manager the pool can take an idle session from."""

    def evict(self, sid: str) -> None:
        """Forget ``sid`` now (it answers 404 from here on) and end it in the background."""


@dataclass
class _Session:
    manager: Evictable | None
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

    def add(self, sid: str, endpoint: str, manager: Evictable | None = None,
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


class PoolAdmission:
    """One endpoint's part of the shared :class:`SessionPool`, for its session manager.

    The manager (:class:`~mcp_hub.downstream.http.session_manager.HubSessionManager`)
    calls it at each step of a session: :meth:`used` on every request of a live
    session, :meth:`make_room` before a session is admitted, :meth:`admitted` once it
    has its final id, :meth:`opened` after its opening request, :meth:`discarded`
    when it ends.
    """

    def __init__(self, pool: SessionPool, endpoint: str) -> None:
        self.pool = pool
        #: ``/mcp`` or ``/p/NAME/mcp``: shown in status, sealed into replica ids.
        self.endpoint = endpoint

    def used(self, sid: str, scope: Scope, owner: AuthorizationContext | None) -> None:
        """A request for the live session ``sid``: only its owner's counts as a use."""
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        if requestor == owner:
            self.pool.touch(sid)

    def make_room(self) -> bool:
        """Whether a new session may be admitted (evicting the LRU idle one if need be)."""
        return self.pool.make_room()

    def admitted(self, transport: StreamableHTTPServerTransport, manager: Evictable) -> None:
        """A new session of ``manager``, under its final id, joins the pool."""
        if transport.mcp_session_id is not None:
            self.pool.add(transport.mcp_session_id, self.endpoint, manager, transport)

    def opened(self, transport: StreamableHTTPServerTransport) -> None:
        """The opening request was served: a session that has seen only its initialize
        gets a short lease; the next request (notifications/initialized, normally at
        once) restores the full one."""
        idle = transport.idle_scope
        sid = transport.mcp_session_id
        if (idle is not None and sid is not None and self.pool.only_opened(sid)
                and not requests_in_flight(transport)):
            idle.deadline = min(idle.deadline, anyio.current_time() + self.pool.init_timeout)

    def discarded(self, sid: str) -> None:
        """The session ended: it leaves the pool."""
        self.pool.forget(sid)
