"""The hub's Streamable HTTP session manager: one class, its features as composed parts.

:class:`HubSessionManager` is the SDK's session manager opened up by the compat
door (:class:`~mcp_hub.compat.sdk_http.HookedSessionManager`); each endpoint
(``/mcp``, every ``/p/NAME/mcp``) has one. What the hub adds to a session's life
lives in three plain objects, each in its own module, that the manager calls
from its hooks:

* ``pooled`` — :class:`~mcp_hub.downstream.http.session_pool.PoolAdmission`:
  the hub-wide session cap with eviction, the short lease of a session that
  only initialized, the status listing (always present);
* ``resumable`` — :class:`~mcp_hub.downstream.http.resume.ResumableSessions`:
  each session's own view of the bounded event store, so dropped streams
  resume; a session's end cancels its open calls (None when stateless);
* ``sealed`` — :class:`~mcp_hub.downstream.replicas.sessions.SealedSessions`:
  sealed session ids that any replica can rebuild (None when stateless; inert
  without ``[hub.http] session_secret``).

The order of the parts at each step, and why:

* **request** (:meth:`handle_stateful_request`): ``pooled`` first counts the
  owner's request as a use of a live session (before anything else may end or
  refuse it, so the pool's LRU order is that of the clients' own requests);
  then ``sealed`` decides (new sealed id, 404, or a session rebuilt from its
  id) and wraps the SDK's step; without ``sealed`` the SDK's step runs directly.
* **admit** (:meth:`admit_session`): ``pooled`` first makes room (an eviction
  or a refusal comes before the SDK creates anything); the SDK then creates the
  transport, asking ``event_store`` (``resumable`` hands out a fresh view);
  ``sealed`` renames the session to its sealed or recovered id; only then does
  ``resumable`` bind its view and ``pooled`` list the session, both under the
  final id.
* **serve** (:meth:`serve_opening_request`): ``sealed`` first binds the session
  to the opening credential and its lifetime (the opening request may already
  be answered when the SDK's step returns); the SDK serves; ``pooled`` last
  shortens the lease of a session that has seen only its ``initialize``.
* **discard** (:meth:`discard_session`): ``pooled`` first frees the session's
  place under the cap; ``sealed`` forgets its binding and notes an idle expiry
  before the SDK ends the session; ``resumable`` last drops the session's view
  and cancels its open calls, once the session can send nothing more.

The manager's own :meth:`evict` ends a session out of band (the pool at its
cap, a sealed session past its lifetime, the replica bus); :meth:`usable` and
:meth:`may_use` answer the layers that serve a session without the manager
(the HTTP fast path, the dropped-stream watcher).
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, EventStore, StreamableHTTPServerTransport
from starlette.types import Receive, Scope, Send

from mcp_hub.compat.sdk_http import HookedSessionManager
from mcp_hub.downstream.http.resume import ResumableSessions, Resumption
from mcp_hub.downstream.http.session_pool import PoolAdmission, SessionPool
from mcp_hub.downstream.replicas.sessions import ReplicaSessions, SealedSessions

__all__ = ["HubSessionManager"]

_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")


class HubSessionManager(HookedSessionManager):
    """One endpoint's sessions: under the hub's one cap, resumable, served by any replica.

    ``pool`` is shared by every endpoint; ``resumption`` (resumable streams) and
    ``replicas`` (sealed ids) are left out for a stateless manager. The other
    keyword arguments are the SDK manager's; its own cap is off (the pool's holds).
    """

    def __init__(self, app: Any, *, pool: SessionPool, endpoint: str,
                 resumption: Resumption | None = None, replicas: ReplicaSessions | None = None,
                 **kwargs: Any) -> None:
        self.endpoint = endpoint
        self.pooled = PoolAdmission(pool, endpoint)
        self.resumable = ResumableSessions(resumption) if resumption is not None else None
        self.sealed = SealedSessions(replicas, endpoint, self) if replicas is not None else None
        self._event_store: EventStore | None = None
        super().__init__(app, max_sessions=None, **kwargs)

    @property  # type: ignore[override]
    def event_store(self) -> EventStore | None:
        """What the SDK gives a new session's transport: a fresh view of the resumption's
        store (or the store the manager was made with, when nothing resumes)."""
        if self.resumable is None:
            return self._event_store
        return self.resumable.view()

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        self._event_store = value

    # ------------------------------------------------------------ hooks, parts in order
    async def handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k == _HEADER), None)
        if sid is not None and sid in self.transports:
            self.pooled.used(sid, scope, self.owners.get(sid))
        if self.sealed is None:
            await super().handle_stateful_request(scope, receive, send)
        else:
            await self.sealed.handle(scope, receive, send, super().handle_stateful_request)

    def admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        if not self.pooled.make_room():
            return None
        transport = super().admit_session(requestor)
        if transport is not None and self.sealed is not None:
            self.sealed.admitted(transport)
        if self.resumable is not None:
            self.resumable.admitted(transport)
        if transport is not None:
            self.pooled.admitted(transport, self)
        return transport

    async def serve_opening_request(self, http_transport: StreamableHTTPServerTransport,
                                    scope: Scope, receive: Receive, send: Send) -> None:
        if self.sealed is not None:
            self.sealed.opening(http_transport, scope)
        await super().serve_opening_request(http_transport, scope, receive, send)
        self.pooled.opened(http_transport)

    async def discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.pooled.discarded(session_id)
        if self.sealed is not None:
            self.sealed.discarding(session_id, transport)
        await super().discard_session(session_id, transport)
        if self.resumable is not None:
            self.resumable.discarded(session_id)

    # ------------------------------------------------------------ for the other layers
    def evict(self, sid: str) -> None:
        """Forget ``sid`` now (it answers 404 from here on) and end it in the background."""
        transport = self.transports.pop(sid, None)
        self.owners.pop(sid, None)
        if transport is not None and self.task_group is not None:
            self.task_group.start_soon(self.discard_session, sid, transport)

    def usable(self, session_id: str) -> bool:
        """Whether the live session may be served now (a sealed one within its lifetime);
        counts as a use of it. Asked by the HTTP fast path."""
        return True if self.sealed is None else self.sealed.usable(session_id)

    def may_use(self, session_id: str, scope: Scope) -> bool:
        """Whether the request behind ``scope`` may act on ``session_id`` (its stored
        events included); a stateless manager keeps nothing per session to guard."""
        return True if self.sealed is None else self.sealed.may_use(session_id, scope)
