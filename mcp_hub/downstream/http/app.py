"""The HTTP face of the hub: one Starlette app for every HTTP transport.

Routes:

* ``/mcp`` — Streamable HTTP (stateful by default, stateless with ``--stateless``);
  ``/p/NAME/mcp`` — the same for profile NAME;
* ``/sse`` + ``/messages/`` — legacy SSE; ``/p/NAME/sse`` + ``/p/NAME/messages/`` for profile NAME;
* ``/healthz`` (alive), ``/readyz`` (initial upstream connects done), ``/metrics``
  (Prometheus), ``/status.json`` and ``/`` (the status page);
* ``/login``, ``/login/callback``, ``/logout`` (browser sign-in,
  :mod:`~mcp_hub.downstream.signin.login_routes`) and ``/connect/…`` (per-user upstreams).

A browser proves who it is with the identity cookie (an OpenID Connect sign-in, or
a static token traded at ``/?token=T``); it opens ``/`` and ``/status.json`` only,
and ``[[access]]`` rules decide on it as on a bearer header.

Guards wrap everything, outermost first: DNS-rebinding protection (a Host not
allowed → 421, a foreign Origin → 403; :mod:`~mcp_hub.downstream.http.host_rules`), then
bearer-token auth (401 with ``WWW-Authenticate``; ``/healthz`` and ``/readyz`` stay open for
probes). Tokens are compared in constant time and never logged. Below the app, the HTTP
protocol bounds headers, time and unauthenticated connections
(:mod:`~mcp_hub.downstream.http.limits`); each endpoint's sessions have one manager
(:mod:`~mcp_hub.downstream.http.session_manager`), and every endpoint shares one pool
(:mod:`~mcp_hub.downstream.http.session_pool`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, urlencode

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_PARAMS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub import compat
from mcp_hub.auth.audit import AuditLog
from mcp_hub.auth.authenticator import COOKIE_NAME, Authenticator, AuthFailure, sdk_user
from mcp_hub.auth.browser import safe_next
from mcp_hub.auth.identity import Identity
from mcp_hub.compat import hooks
from mcp_hub.config.model import HttpConfig
from mcp_hub.downstream.draining import DrainGuard
from mcp_hub.downstream.http.body import BodyLimit, request_body
from mcp_hub.downstream.http.event_store import BoundedEventStore
from mcp_hub.downstream.http.fastpath import HttpFastPath, freeze_startup_heap
from mcp_hub.downstream.http.forwarded import ForwardedHeaders
from mcp_hub.downstream.http.host_rules import HostRules
from mcp_hub.downstream.http.limits import admit_connection
from mcp_hub.downstream.http.resume import DroppedStreamWatcher, Resumption
from mcp_hub.downstream.http.session_manager import HubSessionManager
from mcp_hub.downstream.http.session_pool import SessionPool
from mcp_hub.downstream.http.sse_routes import sse_endpoints
from mcp_hub.downstream.http.status_page import STATUS_PAGE_HTML
from mcp_hub.downstream.identity import IDENTITY_KEY, build_authenticator, scope_caller
from mcp_hub.downstream.jsonrpc import INVALID_ID, PARSE_TOO_DEEP, has_invalid_id, request_id_of
from mcp_hub.downstream.replicas.shared_rate import SharedRateLimit
from mcp_hub.downstream.replicas.wiring import (
    add_replica_middleware,
    attach_bus,
    replica_sessions_for,
    replication_status,
    state_readiness,
)
from mcp_hub.downstream.server import HubServer, build_server
from mcp_hub.downstream.signin.client_metadata import CLIENT_METADATA_PATH, client_metadata_routes
from mcp_hub.downstream.signin.connect_routes import CONNECT_PREFIX, connect_routes
from mcp_hub.downstream.signin.login_routes import LOGIN_PATH, LOGIN_PATHS, login_routes
from mcp_hub.hub.access import EVERYONE, Caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.state import StateBackend

__all__ = ["build_app"]

logger = logging.getLogger(__name__)

# Probes must work without credentials; they reveal nothing but up/ready.
_OPEN_PATHS = frozenset({"/healthz", "/readyz", CLIENT_METADATA_PATH})
# The cookie opens the status page and its data, nothing else (docs/deployment.md).
_COOKIE_PATHS = frozenset({"/", "/status.json"})
#: Headers a request may carry once: a second copy is ambiguous (which one was checked?).
_SINGLE_HEADERS = (b"authorization", b"host")


class GuardMiddleware:
    """DNS-rebinding protection, sign-in (:mod:`mcp_hub.auth`) and an optional per-identity rate limit."""

    def __init__(self, app: ASGIApp, *, bind_host: str, http: HttpConfig,
                 authn: Authenticator | None = None, audit: AuditLog | None = None,
                 state: StateBackend | None = None) -> None:
        self.app = app
        self.authn = authn or Authenticator(tokens=http.token_entries(), auth=None, public_url=None,
                                            name="mcp-hub", profiles=frozenset, rules=list)
        self.audit = audit
        self.rules = HostRules.for_bind(bind_host, http.allowed_hosts, http.allowed_origins)
        self.rate = http.rate_limit_per_minute
        self._hits: dict[str, deque[float]] = defaultdict(deque)
        #: Replicas sharing a store count each identity in one window (mcp_hub.downstream.replicas.shared_rate).
        self.shared_rate = (SharedRateLimit(state, self.rate)
                            if state is not None and state.shared and self.rate else None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        path = scope.get("path", "")
        if path in _OPEN_PATHS:
            # Probes come with the pod IP or 127.0.0.1 as Host and reveal only up/ready.
            await self.app(scope, receive, send)
            return
        repeated = _repeated_header(scope["headers"])
        if repeated is not None:
            logger.warning("refused a request with more than one %s header", repeated)
            await PlainTextResponse(f"More than one {repeated} header", status_code=400)(
                scope, receive, send)
            return
        if not self.rules.host_allowed(host):
            logger.warning("refused request with Host %r (DNS-rebinding protection)", host[:100])
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin and not self.rules.origin_allowed(origin, host):
            logger.warning("refused request with Origin %r", origin[:100])
            await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
            return
        if self.authn.serves_metadata(path):
            # RFC 9728 documents are public: a client reads them before it has a token.
            await self.authn.metadata_response(scope)(scope, receive, send)
            return
        if (self.authn.has_static_tokens and path == "/" and scope.get("query_string")
                and await self._trade_token(scope, headers, receive, send)):
            return
        if self.authn.enabled and not _signs_in(path):  # these pages check the browser themselves
            identity = await self._identify(scope, headers, receive, send)
            if identity is None:
                return
            if self.rate is not None and not await self._admit_shared(identity.name):
                await JSONResponse(
                    {"error": "rate_limited", "error_description": "too many requests"},
                    status_code=429, headers={"Retry-After": "60"},
                )(scope, receive, send)
                return
        admit_connection(scope)
        await self.app(scope, receive, send)

    async def _trade_token(self, scope: Scope, headers: dict[str, str], receive: Receive,
                           send: Send) -> bool:
        """``/?token=T``: a browser cannot send a bearer header, so the token is traded for
        the identity cookie (HttpOnly, SameSite=Strict) and dropped from the address bar.
        The identity must pass the ``[[access]]`` rules, as on a header. True if answered."""
        query = parse_qs(scope["query_string"].decode("latin-1"))
        given = (query.get("token") or [""])[0]
        identity = self.authn.static(given) if given else None
        if identity is None:
            return False
        try:
            self.authn.admit(identity)
        except AuthFailure as failure:
            await self._refuse(scope, failure, receive, send)
            return True
        value, seconds = self.authn.identity_cookie(identity, "token")
        cookie = f"{COOKIE_NAME}={value}; HttpOnly; SameSite=Strict; Path=/; Max-Age={seconds}"
        # A trusted proxy's X-Forwarded-Proto is in the scheme already (downstream.forwarded).
        if scope.get("scheme") == "https" or (self.authn.public_url or "").startswith("https://"):
            cookie += "; Secure"
        back = safe_next((query.get("next") or ["/"])[0])
        await Response(status_code=303, headers={"Location": back, "Set-Cookie": cookie,
                                                 "Cache-Control": "no-store"})(scope, receive, send)
        return True

    async def _refuse(self, scope: Scope, failure: AuthFailure, receive: Receive,
                      send: Send) -> None:
        """Log, audit and answer a refused request (never with its credential)."""
        path = scope.get("path", "")
        client = scope.get("client") or ("?", 0)
        logger.warning("authentication failed for %s %s from %s: %d %s", scope.get("method"),
                       path, client[0], failure.status, failure.description)
        if self.audit is not None:
            who = failure.identity
            self.audit.denied(identity=who.name if who else None,
                              client_id=who.client_id if who else None,
                              method=str(scope.get("method")), path=path,
                              status=failure.status, reason=failure.description)
        await self.authn.refusal(scope, failure)(scope, receive, send)

    async def _identify(self, scope: Scope, headers: dict[str, str], receive: Receive,
                        send: Send) -> Identity | None:
        """The request's identity, stored on the scope; None after answering 401/403/503."""
        path = scope.get("path", "")
        try:
            identity = await self.authn.identify(headers.get("authorization", ""), scope)
        except AuthFailure as failure:
            found = None
            if failure.status == 401 and scope.get("method") == "GET" and path in _COOKIE_PATHS:
                # The cookie opens only the read-only pages, never the MCP endpoints; the
                # [[access]] rules decide on its identity as on a header's (403 otherwise).
                try:
                    found = self.authn.from_cookie(headers.get("cookie", ""))
                except AuthFailure as refused:
                    failure = refused
                if found is None and failure.status == 401 and path == "/" \
                        and self.authn.browser is not None:
                    await _to_login("/")(scope, receive, send)
                    return None
            if found is None:
                await self._refuse(scope, failure, receive, send)
                return None
            identity = found
        scope["user"] = sdk_user(identity)
        scope[IDENTITY_KEY] = identity
        return identity

    async def _admit_shared(self, key: str) -> bool:
        admitted = None if self.shared_rate is None else await self.shared_rate.admit(key)
        return self._admit(key) if admitted is None else admitted

    def _admit(self, key: str) -> bool:
        assert self.rate is not None
        now = time.monotonic()
        if len(self._hits) > 10_000 and key not in self._hits:
            self._hits.clear()
        window = self._hits[key]
        while window and now - window[0] > 60.0:
            window.popleft()
        if len(window) >= self.rate:
            return False
        window.append(now)
        return True


class RequestShapeGuard:
    """Answers a JSON-RPC request whose ``params`` is not an object with an error carrying its id.

    The SDK's Streamable HTTP transport rejects such a message with HTTP 400 and
    ``"id": null``, so the client cannot tell which request failed. The check is a
    plain ``json.loads`` of the body, and only for POSTs to an MCP endpoint; every
    other request goes through untouched. The body is the one :class:`BodyLimit` read.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope.get("path", "").endswith("/mcp"):
            await self.app(scope, receive, send)
            return
        answer = _shape_error(request_body(scope))
        if answer is not None:
            await JSONResponse(answer, status_code=400)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _shape_error(body: bytes) -> dict[str, Any] | None:
    if b'"params"' not in body and b'"id"' not in body:
        return None
    try:
        raw = json.loads(body)
    except ValueError:
        return None
    except RecursionError:
        return PARSE_TOO_DEEP
    if has_invalid_id(raw):
        return INVALID_ID
    rid = request_id_of(raw)
    if rid is None or "params" not in raw or isinstance(raw["params"], dict):
        return None
    return {"jsonrpc": "2.0", "id": rid,
            "error": {"code": INVALID_PARAMS, "message": "Invalid request: params must be an object"}}


def _signs_in(path: str) -> bool:
    """Pages that identify the browser themselves: sign-in, and connect links (whose
    ticket names the identity the browser's cookie must match)."""
    return path in LOGIN_PATHS or path.startswith(CONNECT_PREFIX)


def _to_login(back: str) -> Response:
    """Send a browser that is not signed in to the hub's sign-in, and back to ``back``."""
    return Response(status_code=302, headers={"Location": f"{LOGIN_PATH}?{urlencode({'next': back})}",
                                              "Cache-Control": "no-store"})


def _repeated_header(raw: list[tuple[bytes, bytes]]) -> str | None:
    """The first of :data:`_SINGLE_HEADERS` that occurs more than once, if any."""
    seen: set[bytes] = set()
    for name, _ in raw:
        lowered = name.lower()
        if lowered in _SINGLE_HEADERS:
            if lowered in seen:
                return lowered.decode().title()
            seen.add(lowered)
    return None


def _security(bind_host: str, http: HttpConfig) -> TransportSecuritySettings:
    # One implementation of the Host/Origin rules: the guard applies them to every
    # route first, so the SDK transports' own (prefix-matching) check is off.
    return HostRules.for_bind(bind_host, http.allowed_hosts, http.allowed_origins).sdk_settings()


def _session_owner_check(managers: Iterable[HubSessionManager]
                         ) -> Callable[[str, Scope], bool]:
    """(session id, scope) -> whether the request may act on that session of its endpoint."""
    by_path = {m.endpoint: m for m in managers}

    def may_use(session_id: str, scope: Scope) -> bool:
        manager = by_path.get(scope.get("path", ""))
        # An endpoint without sessions of its own: the watcher's refusal rule still holds.
        return True if manager is None else manager.may_use(session_id, scope)

    return may_use


def _ops_routes(hub: ServingHub, pool: SessionPool, resumption: Resumption, fast_served: dict[str, int],
                replicas: Any, bus: Any) -> list[Route | Mount]:
    """Health, readiness, metrics, the status page and its JSON."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = hub.upstreams_ready
        # A shared store that is down degrades the hub but does not make it unready
        # (what does not need the store keeps working): the body says so.
        body: dict[str, Any] = {"ready": ready, **state_readiness(hub.state)}
        waiting = [s.name for s in hub.upstream_statuses() if str(s.state) == "needs_login"]
        if waiting:  # OAuth servers waiting for `mcp-hub login NAME`; the hub serves the rest
            body["needs_login"] = waiting
        return JSONResponse(body, status_code=200 if ready else 503)

    # The views follow the request's identity, however it signed in (mcp_hub.hub.access.OpsView).
    async def metrics(request: Request) -> Response:
        body = hub.metrics_text(scope_caller(request.scope, EVERYONE))
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    async def status_json(request: Request) -> Response:
        caller = scope_caller(request.scope, EVERYONE)
        body = hub.status(caller)
        if hub.ops_view(caller).hub_wide:
            body["http_sessions"] = pool.describe()
            body["resumption"] = resumption.stats()
            body["http_fast_path"] = dict(fast_served)
            body["replicas"] = replication_status(replicas, bus, resumption)
        return Response(json.dumps(body, default=str), media_type="application/json")

    async def status_page(request: Request) -> Response:
        return HTMLResponse(STATUS_PAGE_HTML)

    return [
        Route("/healthz", endpoint=healthz, methods=["GET"]),
        Route("/readyz", endpoint=readyz, methods=["GET"]),
        Route("/metrics", endpoint=metrics, methods=["GET"]),
        Route("/status.json", endpoint=status_json, methods=["GET"]),
        Route("/", endpoint=status_page, methods=["GET"]),
    ]


def build_app(hub: ServingHub, *, host: str, http: HttpConfig, stateless: bool = False) -> Starlette:
    """Build the Starlette app serving ``hub`` over Streamable HTTP and SSE."""
    security = _security(host, http)
    servers: dict[str | None, HubServer] = {None: build_server(hub)}
    for name in hub.config.profiles:
        servers[name] = build_server(hub, name)
    # One session cap for every endpoint; at the cap the LRU idle session is evicted.
    pool = SessionPool(http.max_sessions, http.session_init_timeout)
    resumption = Resumption(
        BoundedEventStore(http.event_store_max_events, http.event_store_max_bytes),
        hub.open_calls, http.resume_grace_seconds)
    replicas = replica_sessions_for(hub, http)
    managers: dict[str | None, HubSessionManager] = {
        name: HubSessionManager(
            server,
            pool=pool,
            endpoint="/mcp" if name is None else f"/p/{name}/mcp",
            # A stateless manager keeps no sessions: nothing to resume or rebuild.
            resumption=None if stateless else resumption,
            replicas=None if stateless else replicas,
            stateless=stateless,
            security_settings=security,
            max_request_body_size=http.max_body_bytes,
            session_idle_timeout=http.session_idle_timeout,
            retry_interval=http.sse_retry_ms or None,
        )
        for name, server in servers.items()
    }
    bus = attach_bus(hub.state, managers.values(), resumption, replicas)
    authn = build_authenticator(hub, http)
    sse_routes: list[Route | Mount] = []
    for profile, server in servers.items():
        prefix = "" if profile is None else f"/p/{profile}"
        sse_routes += sse_endpoints(server, prefix, security, pool, http.max_body_bytes)

    fast_served: dict[str, int] = {}

    routes: list[Route | Mount] = [
        Route("/mcp", endpoint=StreamableHTTPASGIApp(managers[None])),
        *sse_routes,
        *_ops_routes(hub, pool, resumption, fast_served, replicas, bus),
        *connect_routes(hub, http.public_url, authn),
        *login_routes(authn, http.public_url),
        *client_metadata_routes(hub.config),
    ]
    for profile, manager in managers.items():
        if profile is not None:
            routes.append(Route(f"/p/{profile}/mcp", endpoint=StreamableHTTPASGIApp(manager)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(resumption.running())
            for manager in managers.values():
                await stack.enter_async_context(manager.run())
            freeze_startup_heap()
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    add_replica_middleware(app, bus, replicas, resumption)
    app.add_middleware(DroppedStreamWatcher, resumption=resumption,
                       may_use=_session_owner_check(managers.values()))
    # Plain JSON answers for plain requests on live sessions; off (the SDK's path
    # serves everything) when the transport's private counters are not as expected.
    if not stateless and compat.feature_ok(hooks.HTTP_FAST_PATH):
        app.add_middleware(HttpFastPath, hub=hub, served=fast_served,
                           bus=bus, resumption=resumption, endpoints={
            manager.endpoint: (manager, Caller(profile=name)) for name, manager in managers.items()})
    app.add_middleware(DrainGuard, drain=hub.drain)
    app.add_middleware(RequestShapeGuard)
    # Every body is read here, once, bounded: no layer below reads one itself.
    app.add_middleware(BodyLimit, max_body=http.max_body_bytes)
    app.add_middleware(GuardMiddleware, bind_host=host, http=http,
                       authn=authn, audit=hub.audit, state=hub.state)
    app.add_middleware(ForwardedHeaders, trusted=http.trusted_proxies)
    return app


def describe_endpoints(host: str, port: int, profiles: list[str]) -> dict[str, Any]:
    """The URLs a client connects to, for the CLI's start-up message."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    return {
        "streamable_http": f"{base}/mcp",
        "sse": f"{base}/sse",
        "status": f"{base}/",
        "profiles": {p: f"{base}/p/{p}/mcp" for p in profiles},
    }
