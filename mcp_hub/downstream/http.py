"""The HTTP face of the hub: one Starlette app for every HTTP transport.

Routes:

* ``/mcp`` — Streamable HTTP (stateful by default, stateless with ``--stateless``);
  ``/p/NAME/mcp`` — the same for profile NAME;
* ``/sse`` + ``/messages/`` — legacy SSE; ``/p/NAME/sse`` + ``/p/NAME/messages/`` for profile NAME;
* ``/healthz`` (alive), ``/readyz`` (initial upstream connects done), ``/metrics``
  (Prometheus), ``/status.json`` and ``/`` (the status page).

Guards wrap everything, outermost first: DNS-rebinding protection (a Host not
allowed → 421, a foreign Origin → 403; :mod:`~mcp_hub.downstream.host_rules`), then
bearer-token auth (401 with ``WWW-Authenticate``; ``/healthz`` and ``/readyz`` stay open for
probes). Tokens are compared in constant time and never logged. Below the app, the HTTP
protocol bounds headers, time and unauthenticated connections
(:mod:`~mcp_hub.downstream.http_limits`); sessions of every endpoint share one pool
(:mod:`~mcp_hub.downstream.session_pool`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from functools import partial
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_PARAMS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.config import HttpConfig
from mcp_hub.downstream.asgi_body import buffer_body
from mcp_hub.downstream.draining import DrainGuard
from mcp_hub.downstream.event_store import BoundedEventStore
from mcp_hub.downstream.host_rules import HostRules
from mcp_hub.downstream.http_limits import admit_connection
from mcp_hub.downstream.jsonrpc import INVALID_ID, PARSE_TOO_DEEP, has_invalid_id, request_id_of
from mcp_hub.downstream.resume import DroppedStreamWatcher, ResumableSessionManager, Resumption
from mcp_hub.downstream.server import HubServer, build_server
from mcp_hub.downstream.session_pool import PooledSessionManager, SessionPool
from mcp_hub.downstream.sse_routes import sse_endpoints
from mcp_hub.downstream.status_page import STATUS_PAGE_HTML
from mcp_hub.hub import Hub

__all__ = ["build_app"]

logger = logging.getLogger(__name__)

# Probes must work without credentials; they reveal nothing but up/ready.
_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
COOKIE_NAME = "mcp_hub_token"
# The cookie opens the status page and its data, nothing else (docs/deployment.md).
_COOKIE_PATHS = frozenset({"/", "/status.json"})
#: Headers a request may carry once: a second copy is ambiguous (which one was checked?).
_SINGLE_HEADERS = (b"authorization", b"host")


class GuardMiddleware:
    """DNS-rebinding protection, bearer auth and an optional per-token rate limit."""

    def __init__(self, app: ASGIApp, *, bind_host: str, http: HttpConfig) -> None:
        self.app = app
        self.tokens = [t.encode() for t in http.auth_tokens if t]
        self.rules = HostRules.for_bind(bind_host, http.allowed_hosts, http.allowed_origins)
        self.rate = http.rate_limit_per_minute
        self._hits: dict[int, deque[float]] = defaultdict(deque)

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
        if self.tokens and path == "/" and scope.get("query_string"):
            # A browser cannot send a bearer header: /?token=T trades the token for
            # an HttpOnly, SameSite=Strict cookie and drops it from the address bar.
            query = parse_qs(scope["query_string"].decode("latin-1"))
            given = (query.get("token") or [""])[0]
            if given and self._authenticate(f"Bearer {given}") is not None:
                secure = scope.get("scheme") == "https" or headers.get("x-forwarded-proto") == "https"
                cookie = f"{COOKIE_NAME}={quote(given)}; HttpOnly; SameSite=Strict; Path=/"
                if secure:
                    cookie += "; Secure"
                await Response(status_code=303, headers={"Location": "/", "Set-Cookie": cookie})(
                    scope, receive, send)
                return
        if self.tokens and path not in _OPEN_PATHS:
            index = self._authenticate(headers.get("authorization", ""))
            if index is None and scope.get("method") == "GET" and path in _COOKIE_PATHS:
                # The cookie opens only the read-only pages, never the MCP endpoints.
                index = self._authenticate_cookie(headers.get("cookie", ""))
            if index is None:
                client = scope.get("client") or ("?", 0)
                logger.warning("authentication failed for %s %s from %s", scope.get("method"),
                               path, client[0])
                await JSONResponse(
                    {"error": "unauthorized", "error_description": "a valid bearer token is required"},
                    status_code=401,
                    headers={"WWW-Authenticate": 'Bearer realm="mcp-hub"'},
                )(scope, receive, send)
                return
            if self.rate is not None and not self._admit(index):
                await JSONResponse(
                    {"error": "rate_limited", "error_description": "too many requests"},
                    status_code=429, headers={"Retry-After": "60"},
                )(scope, receive, send)
                return
        admit_connection(scope)
        await self.app(scope, receive, send)

    def _authenticate(self, header: str) -> int | None:
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer" or not value:
            return None
        given = value.strip().encode()
        found: int | None = None
        for i, token in enumerate(self.tokens):
            # Compare against every token so timing does not reveal which matched.
            if hmac.compare_digest(given, token) and found is None:
                found = i
        return found

    def _authenticate_cookie(self, header: str) -> int | None:
        for part in header.split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE_NAME and value:
                return self._authenticate(f"Bearer {unquote(value)}")
        return None

    def _admit(self, index: int) -> bool:
        assert self.rate is not None
        now = time.monotonic()
        window = self._hits[index]
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
    other request goes through untouched (its body replayed as received).
    """

    def __init__(self, app: ASGIApp, *, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or not scope.get("path", "").endswith("/mcp"):
            await self.app(scope, receive, send)
            return
        read = await buffer_body(receive, limit=self.max_body)
        if read.complete:
            answer = _shape_error(read.body)
            if answer is not None:
                await JSONResponse(answer, status_code=400)(scope, read.receive, send)
                return

        await self.app(scope, read.receive, send)


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


class _HubSessionManager(PooledSessionManager, ResumableSessionManager):
    """Sessions under the one global cap (session_pool) whose dropped streams resume (resume)."""


def build_app(hub: Hub, *, host: str, http: HttpConfig, stateless: bool = False) -> Starlette:
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
    managers: dict[str | None, StreamableHTTPSessionManager] = {
        name: (PooledSessionManager if stateless else partial(
            _HubSessionManager, resumption=resumption))(
            server,
            pool=pool,
            endpoint="/mcp" if name is None else f"/p/{name}/mcp",
            stateless=stateless,
            security_settings=security,
            max_request_body_size=http.max_body_bytes,
            session_idle_timeout=http.session_idle_timeout,
        )
        for name, server in servers.items()
    }
    sse_routes: list[Route | Mount] = []
    for profile, server in servers.items():
        prefix = "" if profile is None else f"/p/{profile}"
        sse_routes += sse_endpoints(server, prefix, security, pool)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = hub.upstreams_ready
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        body = hub.metrics.render(
            upstreams=hub.upstream_statuses(), list_changed=hub.sessions.sent,
            sessions=hub.sessions.count,
        )
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    async def status_json(request: Request) -> Response:
        body = hub.status()
        body["http_sessions"] = pool.describe()
        body["resumption"] = resumption.stats()
        return Response(json.dumps(body, default=str), media_type="application/json")

    async def status_page(request: Request) -> Response:
        return HTMLResponse(STATUS_PAGE_HTML)

    routes: list[Route | Mount] = [
        Route("/mcp", endpoint=StreamableHTTPASGIApp(managers[None])),
        *sse_routes,
        Route("/healthz", endpoint=healthz, methods=["GET"]),
        Route("/readyz", endpoint=readyz, methods=["GET"]),
        Route("/metrics", endpoint=metrics, methods=["GET"]),
        Route("/status.json", endpoint=status_json, methods=["GET"]),
        Route("/", endpoint=status_page, methods=["GET"]),
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
            yield

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(DroppedStreamWatcher, resumption=resumption)
    app.add_middleware(DrainGuard, drain=hub.drain)
    app.add_middleware(RequestShapeGuard, max_body=http.max_body_bytes)
    app.add_middleware(GuardMiddleware, bind_host=host, http=http)
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
