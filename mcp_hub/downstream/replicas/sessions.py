"""Any replica serves any session: sealed session ids and recovered sessions.

With ``[hub.http] session_secret`` set, a new Streamable HTTP session gets a
sealed id (:mod:`mcp_hub.downstream.replicas.sealed_session`) instead of a random one.
A replica receiving a request for a session it has never seen opens the id,
checks it was opened with the same credential, and rebuilds the session: a
transport under that id and a connection that is already initialized with the
sealed protocol version, capabilities and client info. What changed after
``initialize`` — the log level and resource subscriptions — comes from the
shared state store (:func:`remember_level`, :func:`remember_subscription`).

A rebuilt connection gets its caller (the endpoint's profile, sealed in the id,
with the identity the id is bound to, taken from the request that proved it)
before it is tracked, so a ``list_changed`` for tools that caller cannot see
never reaches it, not even before its first request.

A sealed id has lifetimes every replica checks (:class:`Lifetimes`): an absolute
one (``[hub.http] session_max_lifetime``, sealed into the id) and an idle one
(``session_idle_timeout``: the id is rebuilt only if the session was used within
it, as the shared store records, or this replica saw). A DELETE puts the id in a
closed set, locally and in the shared store, for as long as the id could be
valid, so no replica rebuilds it.

:class:`SealedSessions` is one session manager's part of this
(:mod:`~mcp_hub.downstream.http.session_manager` calls it from the hooks the
compat door gives the SDK's manager); ``tests/test_replicas.py`` and
``tests/test_sealed_session_guards.py`` pin the behaviour across SDK updates. The
HTTP fast path asks the manager's :meth:`~SealedSessions.usable` before it serves
a live session.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import anyio.abc
from anyio.abc import TaskStatus
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext, authorization_context
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from mcp_hub.compat.sdk_http import negotiate_initialize
from mcp_hub.downstream.http.body import request_body
from mcp_hub.downstream.identity import scope_caller
from mcp_hub.downstream.replicas.sealed_session import SessionSealer, credential_tag, session_credential
from mcp_hub.hub.access import Caller, remember_caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.protocol.log_levels import set_client_log_level
from mcp_hub.state import StateBackend, StateUnavailable

__all__ = ["Lifetimes", "ReplicaSessions", "SealedSessions", "SessionHost", "remember_level",
           "remember_subscription"]

logger = logging.getLogger(__name__)

_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
#: The id the session about to be admitted gets (sealed, or a recovered one).
_NEXT_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_hub_next_sid", default=None)
#: How long the shared store keeps a session's later state after its last change.
STATE_TTL = 24 * 3600.0
#: Local records (closed ids, last uses) are swept of stale entries past this many.
_SWEEP_AT = 4096


def _key(session_id: str, what: str) -> str:
    return f"session:{_digest(session_id)}:{what}"


async def remember_level(state: StateBackend, session_id: str | None, level: str) -> None:
    """Record a session's ``logging/setLevel`` for the other replicas (best effort)."""
    if session_id is None or not state.shared:
        return
    try:
        await state.put(_key(session_id, "level"), level.encode(), STATE_TTL)
    except StateUnavailable:
        logger.warning("log level of a session not shared: the state store is unavailable")


async def remember_subscription(state: StateBackend, session_id: str | None, uri: str,
                                subscribed: bool) -> None:
    """Record a session's resource (un)subscription for the other replicas (best effort)."""
    if session_id is None or not state.shared:
        return
    try:
        if subscribed:
            await state.set_add(_key(session_id, "subs"), uri, STATE_TTL)
        else:
            await state.set_remove(_key(session_id, "subs"), uri)
    except StateUnavailable:
        logger.warning("resource subscription not shared: the state store is unavailable")


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict) or raw.get("method") != "initialize":
        return None
    params = raw.get("params")
    return params if isinstance(params, dict) else None


class Lifetimes:
    """How long a sealed id may be used: absolute and idle, in seconds.

    ``closed`` and ``seen`` are this process's own records (keyed by a digest of
    the id): ids a client ended here, and when this replica last saw each id used.
    Both are bounded: a closed id is kept only until its absolute lifetime ends
    (it is refused after that anyway), a last use only for the idle lifetime.
    """

    def __init__(self, max_lifetime: float, idle: float) -> None:
        self.max_lifetime = max_lifetime
        self.idle = idle
        self.closed: dict[str, float] = {}
        self.seen: dict[str, float] = {}

    def expiry(self, sealed: dict[str, Any]) -> float:
        """When the id expires: its sealed expiry, and never later than this config allows."""
        opened = _number(sealed.get("ts"), 0.0)
        return min(_number(sealed.get("x"), math.inf), opened + self.max_lifetime)

    def close(self, digest: str, expiry: float) -> None:
        self.closed[digest] = expiry
        if len(self.closed) > _SWEEP_AT:
            now = time.time()
            self.closed = {k: v for k, v in self.closed.items() if v > now}

    def is_closed(self, digest: str) -> bool:
        return self.closed.get(digest, 0.0) > time.time()

    def used(self, digest: str) -> None:
        self.seen[digest] = time.time()
        if len(self.seen) > _SWEEP_AT:
            cutoff = time.time() - self.idle
            self.seen = {k: v for k, v in self.seen.items() if v > cutoff}

    def fresh_here(self, digest: str, opened: float) -> bool:
        """Whether the id was opened, or used on this replica, within the idle lifetime."""
        last = max(opened, self.seen.get(digest, 0.0))
        return time.time() - last <= self.idle


def _number(value: Any, default: float) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()[:32]


class ReplicaSessions:
    """What every replica needs to rebuild a session: the sealer, the store, the hub's hooks."""

    def __init__(self, sealer: SessionSealer | None, state: StateBackend, hub: ServingHub,
                 lifetimes: Lifetimes | None = None) -> None:
        self.sealer = sealer
        self.state = state
        self.hub = hub
        self.lifetimes = lifetimes or Lifetimes(STATE_TTL, 3600.0)
        #: Sessions rebuilt on this replica from a sealed id.
        self.recovered = 0
        #: Told when a client ends a session here, so other replicas end their copies.
        self.on_closed: Callable[[str], Awaitable[None]] | None = None
        self._touched: dict[str, float] = {}

    def _sealed(self, session_id: str) -> dict[str, Any] | None:
        """The sealed state of ``session_id`` if it is ours, unexpired and not ended here."""
        if self.sealer is None:
            return None
        sealed = self.sealer.open(session_id)
        if (sealed is None or self.lifetimes.expiry(sealed) <= time.time()
                or self.lifetimes.is_closed(_digest(session_id))):
            return None
        return sealed

    def expiry(self, session_id: str) -> float:
        """When ``session_id`` stops being valid (0 if it is not a valid sealed id now)."""
        sealed = self._sealed(session_id)
        return 0.0 if sealed is None else self.lifetimes.expiry(sealed)

    async def closed(self, session_id: str) -> None:
        """The client ended ``session_id`` (DELETE): no replica may rebuild it any more.

        Recorded here, and in the shared store for exactly the id's remaining
        lifetime (after that every replica refuses it anyway)."""
        sealed = self.sealer.open(session_id) if self.sealer is not None else None
        expiry = self.lifetimes.expiry(sealed) if sealed is not None else time.time() + STATE_TTL
        self.lifetimes.close(_digest(session_id), expiry)
        remaining = expiry - time.time()
        if self.state.shared and remaining > 0:
            try:
                await self.state.put(_key(session_id, "closed"), b"1", max(remaining, 1.0))
            except StateUnavailable:
                logger.warning("an ended session was not recorded: the state store is "
                               "unavailable; other replicas can still rebuild it")
        if self.on_closed is not None:
            await self.on_closed(session_id)

    def idle_ended(self, session_id: str) -> None:
        """The session's copy here idled out. Without a shared store this replica has no
        record of a later use elsewhere: it refuses the id from now on (with a store,
        the record of uses decides, :meth:`idle_expired`)."""
        sealed = self.sealer.open(session_id) if self.sealer is not None else None
        if sealed is not None and not self.state.shared:
            self.lifetimes.close(_digest(session_id), self.lifetimes.expiry(sealed))

    async def was_closed(self, session_id: str) -> bool:
        """Whether a client ended ``session_id`` on some replica (False if nobody can tell)."""
        if self.lifetimes.is_closed(_digest(session_id)):
            return True
        if not self.state.shared:
            return False
        try:
            return await self.state.get(_key(session_id, "closed")) is not None
        except StateUnavailable:
            return False

    async def idle_expired(self, session_id: str, sealed: dict[str, Any]) -> bool:
        """Whether ``session_id`` went unused for longer than the idle lifetime.

        Fresh if opened or seen here within it; else, with a shared store, if any
        replica recorded a use within it (:meth:`touch`)."""
        if self.lifetimes.fresh_here(_digest(session_id), _number(sealed.get("ts"), 0.0)):
            return False
        if not self.state.shared:
            return True
        try:
            return await self.state.get(_key(session_id, "seen")) is None
        except StateUnavailable:
            return True

    def touch(self, session_id: str) -> bool:
        """The session was used here: record it; True when the shared store should hear
        of it too (:meth:`share_touch`), at most once per eighth of the idle lifetime."""
        digest = _digest(session_id)
        self.lifetimes.used(digest)
        if not self.state.shared:
            return False
        idle = self.lifetimes.idle
        now = time.monotonic()
        if now - self._touched.get(digest, -math.inf) < idle / 8:
            return False
        self._touched[digest] = now
        if len(self._touched) > _SWEEP_AT:
            self._touched = {k: v for k, v in self._touched.items() if now - v < idle}
        return True

    async def share_touch(self, session_id: str) -> None:
        """Record a use of ``session_id`` for the other replicas; the record outlives the
        idle lifetime by the eighth :meth:`touch` may leave between two writes."""
        try:
            await self.state.put(_key(session_id, "seen"), b"1", self.lifetimes.idle * 1.125)
        except StateUnavailable:
            self._touched.pop(_digest(session_id), None)

    def seal(self, params: dict[str, Any], authorization: str, endpoint: str) -> str | None:
        if self.sealer is None:
            return None
        return self.sealer.seal({
            "p": {k: params[k] for k in ("protocolVersion", "capabilities", "clientInfo")
                  if k in params},
            "o": credential_tag(authorization), "e": endpoint,
            "x": int(time.time() + self.lifetimes.max_lifetime)})

    def open_sealed(self, session_id: str, authorization: str, endpoint: str
                    ) -> dict[str, Any] | None:
        """The sealed state of ``session_id`` if it is ours, valid now, and opened with the
        same credential on the same endpoint (a profile's session never serves another)."""
        sealed = self._sealed(session_id)
        if (sealed is None or sealed.get("o", "") != credential_tag(authorization)
                or sealed.get("e") != endpoint or not isinstance(sealed.get("p"), dict)):
            return None
        return sealed

    def open(self, session_id: str, authorization: str, endpoint: str) -> dict[str, Any] | None:
        """The sealed initialize params of ``session_id`` (see :meth:`open_sealed`)."""
        sealed = self.open_sealed(session_id, authorization, endpoint)
        return None if sealed is None else dict(sealed["p"])

    def owns(self, session_id: str, authorization: str, endpoint: str) -> bool:
        """Whether ``session_id`` is a valid sealed session of this credential on ``endpoint``."""
        return self.open_sealed(session_id, authorization, endpoint) is not None

    async def restore(self, connection: Connection, session_id: str, caller: Caller) -> None:
        """Track the rebuilt connection as ``caller``'s and give it the session's later state.

        The caller is remembered before the connection is tracked: the first
        ``list_changed`` it could receive is already filtered by what it may see."""
        remember_caller(connection, caller)
        self.hub.sessions.add(connection)
        if not self.state.shared:
            return
        try:
            level = await self.state.get(_key(session_id, "level"))
            uris = await self.state.set_members(_key(session_id, "subs"))
        except StateUnavailable:
            logger.warning("session rebuilt without its log level and subscriptions: the "
                           "state store is unavailable")
            return
        if level:
            set_client_log_level(connection.state, level.decode())
        for uri in uris:
            try:  # through the Hub's own door: access is checked again, as on any subscribe
                await self.hub.subscribe(caller, uri, connection)
            except Exception:
                logger.debug("re-subscribing %s for a rebuilt session failed", uri, exc_info=True)


def _caller_of(endpoint: str) -> Caller:
    """The caller an endpoint serves: ``/mcp`` everything, ``/p/NAME/mcp`` profile NAME."""
    parts = endpoint.strip("/").split("/")
    return Caller(profile=parts[1] if len(parts) == 3 and parts[0] == "p" else None)


class SessionHost(Protocol):
    """What :class:`SealedSessions` needs of its session manager."""

    @property
    def app(self) -> Any:
        """The MCP server the manager runs its sessions with."""

    @property
    def lifespan_state(self) -> Any:
        """The server's lifespan state, handed to every session it runs."""

    @property
    def transports(self) -> dict[str, StreamableHTTPServerTransport]:
        """Live sessions' transports by session id."""

    @property
    def owners(self) -> dict[str, AuthorizationContext]:
        """The credential that opened each session, by session id."""

    @property
    def task_group(self) -> anyio.abc.TaskGroup | None:
        """Where the manager runs its sessions (None before it runs)."""

    @property
    def creation_lock(self) -> anyio.Lock:
        """Held while a session is created."""

    def admit_session(self, requestor: AuthorizationContext | None
                      ) -> StreamableHTTPServerTransport | None:
        """A new session's transport, through every admission step; None if refused."""

    async def discard_session(self, session_id: str, transport: StreamableHTTPServerTransport
                              ) -> None:
        """End a session and forget it."""

    def evict(self, sid: str) -> None:
        """Forget ``sid`` now (it answers 404 from here on) and end it in the background."""


class SealedSessions:
    """One session manager's part of the replica sessions: sealed ids any replica rebuilds.

    ``host`` is the manager it belongs to (its tables, its admission and discard,
    its task group); ``endpoint`` is sealed into every id so a profile's session
    never serves another endpoint. The manager calls :meth:`handle` around the
    SDK's handling of each request, :meth:`admitted` once the SDK made a session's
    transport, :meth:`opening` before its opening request, :meth:`discarding`
    before the SDK discards it.
    """

    def __init__(self, replicas: ReplicaSessions, endpoint: str, host: SessionHost) -> None:
        self._replicas = replicas
        self._endpoint = endpoint
        self._host = host
        self._owner_tags: dict[str, str] = {}
        self._expires: dict[str, float] = {}

    @property
    def sealing(self) -> bool:
        """Whether ids are sealed (``[hub.http] session_secret`` set); else this part is inert."""
        return self._replicas.sealer is not None

    async def handle(self, scope: Scope, receive: Receive, send: Send,
                     serve: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        """Serve one stateful request with ``serve`` (the SDK's step): a new session gets
        a sealed id, a known one is checked against its credential and lifetime, one
        never seen here is rebuilt from its sealed id (or answers 404)."""
        if not self.sealing:
            await serve(scope, receive, send)
            return
        sid = None
        for name, value in scope["headers"]:
            if name == _HEADER:
                sid = value.decode("latin-1")
        auth = session_credential(scope)
        if sid is None:
            await self._open_new(scope, receive, send, auth or "", serve)
            return
        if sid in self._host.transports:
            if (self._owner_tags.get(sid, "") != credential_tag(auth or "")
                    or not self.usable(sid)):
                await _not_found(scope, receive, send)
                return
        else:
            user = scope.get("user")
            requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
            caller = scope_caller(scope, _caller_of(self._endpoint))
            transport = await self.local_or_recovered(sid, auth or "", requestor, caller)
            if transport is None:
                await _not_found(scope, receive, send)
                return
        try:
            await serve(scope, receive, send)
        finally:
            self._used(sid)  # a long request (a GET stream) counts as use until it ends
        if scope.get("method") == "DELETE" and sid not in self._host.transports:
            await self._replicas.closed(sid)

    def usable(self, session_id: str) -> bool:
        """Whether the live session ``session_id`` is within its absolute lifetime; counts
        as a use of it. A session past its lifetime is ended here (and answers 404).

        Also asked by paths that serve a live session without the manager's request
        handling (the HTTP fast path)."""
        if not self.sealing:
            return True
        if self._expires.get(session_id, math.inf) <= time.time():
            self._host.evict(session_id)
            return False
        self._used(session_id)
        return True

    def _used(self, session_id: str) -> None:
        group = self._host.task_group
        if self.sealing and self._replicas.touch(session_id) and group is not None:
            group.start_soon(self._replicas.share_touch, session_id)

    def owner_matches(self, session_id: str, authorization: str) -> bool:
        """Whether a request with ``authorization`` may use the live session ``session_id``.

        For paths that serve a live session without going through the manager's
        request handling (the HTTP fast path): a session is bound to the token that
        opened it.
        """
        if not self.sealing:
            return True
        return self._owner_tags.get(session_id, "") == credential_tag(authorization)

    def may_use(self, session_id: str, scope: Scope) -> bool:
        """Whether the request behind ``scope`` may act on ``session_id`` at all.

        Asked before anything of the session is touched (its stored events): the
        live session's owner (the SDK's and, when sealing, the credential's), or for
        a session not live here, a valid sealed id of the same credential."""
        user = scope.get("user")
        requestor = authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        credential = session_credential(scope) or ""
        if session_id in self._host.transports:
            return (requestor == self._host.owners.get(session_id)
                    and self.owner_matches(session_id, credential))
        return self._replicas.owns(session_id, credential, self._endpoint)

    async def _open_new(self, scope: Scope, receive: Receive, send: Send, auth: str,
                        serve: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        params = _initialize_params(request_body(scope))
        wanted = (self._replicas.seal(params, auth, self._endpoint) if params is not None
                  else None)
        token = _NEXT_ID.set(wanted)
        try:
            await serve(scope, receive, send)
        finally:
            _NEXT_ID.reset(token)

    def admitted(self, transport: StreamableHTTPServerTransport) -> None:
        """The SDK made a new session's transport: it takes the sealed (or recovered) id
        meant for it, in the manager's tables too."""
        wanted = _NEXT_ID.get()
        if wanted is None or transport.mcp_session_id is None:
            return
        old = transport.mcp_session_id
        transport.mcp_session_id = wanted
        transports, owners = self._host.transports, self._host.owners
        transports[wanted] = transports.pop(old)
        if old in owners:
            owners[wanted] = owners.pop(old)

    async def local_or_recovered(self, session_id: str, authorization: str,
                                 requestor: AuthorizationContext | None = None,
                                 caller: Caller | None = None
                                 ) -> StreamableHTTPServerTransport | None:
        """The session's transport on this replica, rebuilt from its sealed id if need be.

        ``requestor`` is the SDK's view of the signed-in caller, which the SDK checks
        on every later request of the session; ``caller`` the hub's (the endpoint's
        profile with that identity): the rebuilt session gets only what it may see.

        None when the id is not a valid sealed id for this credential, is past its
        absolute or idle lifetime, was ended by its client (answer 404), or when
        the session cap leaves no room.
        """
        host = self._host
        transport = host.transports.get(session_id)
        if transport is not None:
            return transport
        sealed = self._replicas.open_sealed(session_id, authorization, self._endpoint)
        if (sealed is None or await self._replicas.was_closed(session_id)
                or await self._replicas.idle_expired(session_id, sealed)):
            return None
        async with host.creation_lock:
            transport = host.transports.get(session_id)
            if transport is not None:
                return transport
            token = _NEXT_ID.set(session_id)
            try:
                transport = host.admit_session(requestor)
            finally:
                _NEXT_ID.reset(token)
            if transport is None:
                return None
            self._owner_tags[session_id] = credential_tag(authorization)
            self._expires[session_id] = self._replicas.lifetimes.expiry(sealed)
            assert host.task_group is not None
            await host.task_group.start(self._run_recovered, transport, dict(sealed["p"]),
                                        caller or _caller_of(self._endpoint))
        self._replicas.recovered += 1
        logger.info("rebuilt session %s… from its sealed id", session_id[:12])
        return transport

    def opening(self, transport: StreamableHTTPServerTransport, scope: Scope) -> None:
        """Before a new session's opening request: bind it to the credential that opens
        it, note its absolute lifetime, count the use."""
        sid = transport.mcp_session_id
        if sid is not None:
            self._owner_tags[sid] = credential_tag(session_credential(scope))
            self._expires[sid] = self._replicas.expiry(sid) or math.inf
            self._used(sid)

    async def _run_recovered(self, transport: StreamableHTTPServerTransport, params: dict[str, Any],
                             caller: Caller,
                             *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        sid = transport.mcp_session_id
        assert sid is not None
        async with transport.connect() as (read_stream, write_stream):
            started = False
            try:
                idle_scope = transport.idle_scope or anyio.CancelScope()
                with idle_scope:
                    dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                        read_stream, write_stream, inline_methods=frozenset({"initialize"}))
                    connection = Connection.for_loop(dispatcher, session_id=sid)
                    connection.client_params, connection.protocol_version = (
                        negotiate_initialize(params))
                    connection.initialized.set()
                    # The session's caller, level and subscriptions are back before its
                    # first request is served (an update right after it must not be
                    # missed, nor one it may not see be delivered).
                    await self._replicas.restore(connection, sid, caller)
                    task_status.started()
                    started = True
                    await serve_connection(self._host.app, dispatcher, connection=connection,
                                           lifespan_state=self._host.lifespan_state)
            except Exception:
                logger.exception("rebuilt session %s… crashed", sid[:12])
            finally:
                await self._host.discard_session(sid, transport)
                if not started:
                    task_status.started()

    def discarding(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """Before the SDK discards the session: forget its binding; an id whose copy
        here idled out may not be rebuilt here without a record of a later use."""
        self._owner_tags.pop(session_id, None)
        self._expires.pop(session_id, None)
        idle = transport.idle_scope
        if self.sealing and idle is not None and idle.deadline <= anyio.current_time():
            self._replicas.idle_ended(session_id)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await JSONResponse({"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32600, "message": "Session not found"}},
                       status_code=404)(scope, receive, send)
