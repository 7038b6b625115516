"""The HTTP face of the hub: one Starlette app for every HTTP transport.

Routes:

* ``/mcp`` — Streamable HTTP (stateful by default, stateless with ``--stateless``);
  ``/p/NAME/mcp`` — the same for profile NAME;
* ``/sse`` + ``/messages/`` — legacy SSE;
* ``/healthz`` (alive), ``/readyz`` (initial upstream connects done), ``/metrics``
  (Prometheus), ``/status.json`` and ``/`` (the status page).

Guards wrap everything, outermost first: DNS-rebinding protection (a Host not
allowed → 421, a foreign Origin → 403), then bearer-token auth (401 with
``WWW-Authenticate``; ``/healthz`` and ``/readyz`` stay open for probes). Tokens are compared in
constant time and never logged.
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
from urllib.parse import parse_qs, quote, unquote, urlsplit

from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_PARAMS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.config import HttpConfig
from mcp_hub.downstream.draining import DrainGuard
from mcp_hub.downstream.event_store import BoundedEventStore
from mcp_hub.downstream.jsonrpc import request_id_of
from mcp_hub.downstream.resume import DroppedStreamWatcher, ResumableSessionManager, Resumption
from mcp_hub.downstream.server import HubServer, build_server
from mcp_hub.downstream.status_page import STATUS_PAGE_HTML
from mcp_hub.hub import Hub
from mcp_hub.runtime import is_loopback

__all__ = ["build_app"]

logger = logging.getLogger(__name__)

# Probes must work without credentials; they reveal nothing but up/ready.
_OPEN_PATHS = frozenset({"/healthz", "/readyz"})
COOKIE_NAME = "mcp_hub_token"
_COOKIE_PATHS = frozenset({"/", "/status.json", "/metrics"})
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _host_allowed(host: str, allowed: list[str]) -> bool:
    for pattern in allowed:
        if host == pattern:
            return True
        if pattern.endswith(":*") and host.startswith(pattern[:-1]):
            return True
    return False


class GuardMiddleware:
    """DNS-rebinding protection, bearer auth and an optional per-token rate limit."""

    def __init__(self, app: ASGIApp, *, bind_host: str, http: HttpConfig) -> None:
        self.app = app
        self.tokens = [t.encode() for t in http.auth_tokens if t]
        self.allowed_hosts = list(http.allowed_hosts)
        self.allowed_origins = list(http.allowed_origins)
        self.check_host = True
        if is_loopback(bind_host) or bind_host in ("localhost",):
            for name in _LOOPBACK_NAMES:
                self.allowed_hosts += [name, f"{name}:*"]
                self.allowed_origins += [f"http://{name}", f"http://{name}:*"]
        elif bind_host in ("0.0.0.0", "::", ""):
            # Listening everywhere: Host values cannot be guessed; operators list them
            # in hub.http.allowed_hosts. Auth is mandatory on such a bind anyway.
            self.check_host = bool(http.allowed_hosts)
        else:
            self.allowed_hosts += [bind_host, f"{bind_host}:*"]
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
        if self.check_host and not _host_allowed(host, self.allowed_hosts):
            logger.warning("refused request with Host %r (DNS-rebinding protection)", host[:100])
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin and not self._origin_allowed(origin, host):
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
        await self.app(scope, receive, send)

    def _origin_allowed(self, origin: str, host: str) -> bool:
        if _host_allowed(origin, self.allowed_origins):
            return True
        # Same origin: the page was served by this very host.
        return urlsplit(origin).netloc == host and bool(host)

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
        chunks: list[bytes] = []
        size = 0
        more = True
        messages: list[Any] = []
        while more:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            more = message.get("more_body", False)
            if size > self.max_body:
                break
        if size <= self.max_body and not more:
            answer = _shape_error(b"".join(chunks))
            if answer is not None:
                await JSONResponse(answer, status_code=400)(scope, receive, send)
                return

        async def replay() -> Any:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


def _shape_error(body: bytes) -> dict[str, Any] | None:
    if b'"params"' not in body:
        return None
    try:
        raw = json.loads(body)
    except ValueError:
        return None
    rid = request_id_of(raw)
    if rid is None or "params" not in raw or isinstance(raw["params"], dict):
        return None
    return {"jsonrpc": "2.0", "id": rid,
            "error": {"code": INVALID_PARAMS, "message": "Invalid request: params must be an object"}}


def _security(bind_host: str, http: HttpConfig) -> TransportSecuritySettings:
    # The guard middleware already enforces Host/Origin for every route; the SDK's
    # own check is kept consistent with it (and would catch a mis-mounted route).
    if is_loopback(bind_host) or bind_host == "localhost":
        hosts = [f"{n}:*" for n in _LOOPBACK_NAMES] + list(_LOOPBACK_NAMES) + http.allowed_hosts
        origins = [f"http://{n}:*" for n in _LOOPBACK_NAMES] + http.allowed_origins
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def build_app(hub: Hub, *, host: str, http: HttpConfig, stateless: bool = False) -> Starlette:
    """Build the Starlette app serving ``hub`` over Streamable HTTP and SSE."""
    security = _security(host, http)
    servers: dict[str | None, HubServer] = {None: build_server(hub)}
    for name in hub.config.profiles:
        servers[name] = build_server(hub, name)
    resumption = Resumption(
        BoundedEventStore(http.event_store_max_events, http.event_store_max_bytes),
        hub.open_calls, http.resume_grace_seconds)
    managers: dict[str | None, StreamableHTTPSessionManager] = {
        name: (StreamableHTTPSessionManager if stateless else partial(
            ResumableSessionManager, resumption=resumption))(
            app=server,
            stateless=stateless,
            security_settings=security,
            max_request_body_size=http.max_body_bytes,
            session_idle_timeout=http.session_idle_timeout,
            max_sessions=http.max_sessions,
        )
        for name, server in servers.items()
    }
    sse = SseServerTransport("/messages/", security_settings=security)
    default_server = servers[None]

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
            await default_server.run(
                streams[0], streams[1], default_server.create_initialization_options()
            )
        return Response()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        ready = hub.upstreams.initial_done
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        body = hub.metrics.render(
            upstreams=hub.upstreams.statuses(), list_changed=hub.sessions.sent,
            sessions=hub.sessions.count,
        )
        return PlainTextResponse(body, media_type="text/plain; version=0.0.4")

    async def status_json(request: Request) -> Response:
        status = hub.status()
        status["resumption"] = resumption.stats()
        return Response(json.dumps(status, default=str), media_type="application/json")

    async def status_page(request: Request) -> Response:
        return HTMLResponse(STATUS_PAGE_HTML)

    routes: list[Route | Mount] = [
        Route("/mcp", endpoint=StreamableHTTPASGIApp(managers[None])),
        Route("/sse", endpoint=handle_sse, methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
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
