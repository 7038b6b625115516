"""What the Hub owns for ``oauth_per_user`` servers: tools, calls, connect page and callback.

A call to a per-user server's tool runs on the caller's own upstream session
(:mod:`.pool`), authenticated with the tokens stored for that identity (the
token store's per-identity key, ``user:<identity>``). The hub never sends the
downstream client's own token upstream. An identity with no stored tokens gets
a URL-mode elicitation (MCP 2025-11-25) pointing at ``/connect/NAME?t=…`` when
its client declared URL elicitation, and the ``-32042`` URL-elicitation-required
error with the same URL otherwise. After the browser flow (:mod:`.flows`) the
elicited call goes through, and the client is sent
``notifications/elicitation/complete``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.auth import AuthorizationCodeResult
from mcp.shared.exceptions import UrlElicitationRequiredError

from mcp_hub.config import HubConfig, ServerConfig
from mcp_hub.context import CallContext
from mcp_hub.redact import add_secrets
from mcp_hub.registry import ToolRegistry
from mcp_hub.upstream.oauth.attach import DEFAULT_REDIRECT, token_store
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.provider import HubOAuthProvider
from mcp_hub.upstream.oauth.secretbox import load_key
from mcp_hub.upstream.oauth.tokens import TokenStore
from mcp_hub.upstream.peruser.catalog import PLACEHOLDER, Handler, PerUserCatalog
from mcp_hub.upstream.peruser.flows import Flow, run_flow
from mcp_hub.upstream.peruser.links import ConnectLinks
from mcp_hub.upstream.peruser.pool import UserSessions
from mcp_hub.upstream.peruser.session import list_tools, user_session

__all__ = ["CALLBACK_PATH", "ConnectAnswer", "PerUserServers", "hub_connected"]

logger = logging.getLogger("mcp_hub.upstream.peruser")

CALLBACK_PATH = "/connect/callback"
#: How long an elicited call waits for the person to finish connecting.
ELICIT_WAIT_SECONDS = 300.0
#: How long the page waits for the provider to produce the authorization URL.
PAGE_WAIT_SECONDS = 30.0


def hub_connected(config: HubConfig) -> HubConfig:
    """``config`` without its per-user servers: those get no hub-wide connection."""
    if not any(s.oauth_per_user for s in config.servers.values()):
        return config
    return config.model_copy(update={"servers": {
        n: s for n, s in config.servers.items() if not s.oauth_per_user}})


def store_identity(identity: str) -> str:
    """The token store's identity key of a signed-in caller."""
    return f"user:{identity}"


@dataclass(frozen=True)
class ConnectAnswer:
    """What the page or callback answers the browser: a redirect or a message."""

    status: int
    message: str
    location: str | None = None
    cookie: str | None = None


class PerUserServers:
    """Every per-user server of one Hub (see the module docstring)."""

    def __init__(self, config: HubConfig, registry: ToolRegistry) -> None:
        self.config = config
        self.registry = registry
        self.catalogs: dict[str, PerUserCatalog] = {}
        self._links: ConnectLinks | None = None
        self._flows: dict[str, Flow] = {}  # by OAuth state
        self._connected: dict[tuple[str, str], anyio.Event] = {}
        self.pool = UserSessions(self._open, max_sessions=config.hub.per_user_max_sessions,
                                 idle_seconds=config.hub.per_user_idle_seconds)
        self._tg: anyio.abc.TaskGroup | None = None
        self._servers(config)

    def _servers(self, config: HubConfig) -> None:
        for name, server in config.enabled_servers().items():
            if server.oauth_per_user and server.oauth.client_secret:
                add_secrets([server.oauth.client_secret])  # the manager never sees this server
            if server.oauth_per_user and name not in self.catalogs:
                self.catalogs[name] = PerUserCatalog(
                    name, server, config.hub, self.registry, partial(self._handler, name))
                self.catalogs[name].register_placeholder()

    @property
    def links(self) -> ConnectLinks:
        if self._links is None:
            self._links = ConnectLinks(load_key(self.config.state_path()))
        return self._links

    async def __aenter__(self) -> Self:
        # Started even without per-user servers, so a reload can add one.
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        await self._tg.start(self.pool.run)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        tg, self._tg = self._tg, None
        if tg is None:
            return None
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    def apply_config(self, new: HubConfig) -> None:
        """Adopt a reloaded config: drop servers that left or changed, add new ones."""
        for name, catalog in list(self.catalogs.items()):
            server = new.enabled_servers().get(name)
            if server is None or not server.oauth_per_user or server != catalog.config:
                catalog.clear()
                self.pool.drop(name)
                del self.catalogs[name]
        self.config = new
        self._servers(new)

    def status(self) -> list[dict[str, Any]]:
        """Per server: whether the catalog is known and how many user sessions are live."""
        return [{"name": n, "state": "per_user", "catalog": "listed" if c.listed else "placeholder",
                 "user_sessions": self.pool.count(n)} for n, c in self.catalogs.items()]

    # ------------------------------------------------------------------ calls
    def _store(self, name: str, identity: str) -> TokenStore:
        return token_store(name, self.config.servers[name], store_identity(identity))

    def _handler(self, name: str, raw: str) -> Handler:
        async def per_user(args: dict[str, Any] | None, *, call: CallContext | None = None,
                           **_: Any) -> types.CallToolResult:
            return await self.call_tool(name, raw, args or {}, call or CallContext())

        per_user.__name__ = f"upstream_{name}_per_user_tool"
        return per_user

    async def call_tool(self, name: str, raw: str, args: dict[str, Any],
                        call: CallContext) -> types.CallToolResult:
        """Run ``raw`` on the caller's own session; ask the caller to connect first if needed."""
        identity = call.identity
        if not identity or identity == "anonymous":
            return _error(f"{name} connects each user's own account: sign in to the hub first")
        if not await self._store(name, identity).has_tokens():
            await self._ask_to_connect(name, identity, call)
        try:
            return await self._on_session(name, identity, raw, args)
        except Exception:
            if await self._store(name, identity).has_tokens():
                raise
        # The authorization server refused this identity's refresh token (the provider
        # dropped the tokens): connect again, then retry once.
        await self._ask_to_connect(name, identity, call)
        return await self._on_session(name, identity, raw, args)

    async def _on_session(self, name: str, identity: str, raw: str, args: dict[str, Any]
                          ) -> types.CallToolResult:
        if raw == PLACEHOLDER:
            async with self.pool.use((name, identity)):
                pass  # opening the session lists the catalog
            return _text(f"Connected to {name}; its tools are listed now.")
        async with self.pool.use((name, identity)) as entry:
            assert entry.session is not None
            with anyio.fail_after(self.config.servers[name].max_call_seconds):
                result: types.CallToolResult = await entry.session.call_tool(raw, args)
            return result

    async def _ask_to_connect(self, name: str, identity: str, call: CallContext) -> None:
        """Elicit the connect URL and wait for the flow, or raise the URL-required error."""
        base = self._base_url(call)
        ticket, claims = self.links.issue(name, identity)
        params = types.ElicitRequestURLParams(
            message=f"Connect your {name} account to the hub to use its tools.",
            url=f"{base}/connect/{name}?t={ticket}", elicitation_id=claims.elicitation_id)
        caps = call.client_capabilities
        if caps is None or caps.elicitation is None or caps.elicitation.url is None:
            raise UrlElicitationRequiredError(
                [params], f"{name} needs you to connect your account: open the URL, then retry")
        connected = self._connected.setdefault((name, identity), anyio.Event())
        result = await call.elicit(params)
        if result.action != "accept":
            raise OAuthError(f"connecting {name} was {result.action}d; the call was not made")
        with anyio.move_on_after(ELICIT_WAIT_SECONDS):
            await connected.wait()
        if not connected.is_set():
            raise UrlElicitationRequiredError(
                [params], f"{name} is not connected yet: finish at the URL, then retry")
        await _elicitation_complete(call, claims.elicitation_id)

    def _base_url(self, call: CallContext) -> str:
        public = self.config.hub.http.public_url
        if public:
            return public.rstrip("/")
        host = (call.headers or {}).get("host")
        if not host:
            raise OAuthError("per-user OAuth needs the hub's HTTP transport (or [hub.http] "
                             "public_url) to show the connect page")
        return f"http://{host}"

    @asynccontextmanager
    async def _open(self, key: tuple[str, str], refused: Callable[[], None]
                    ) -> AsyncIterator[ClientSession]:
        name, identity = key
        config = self.config.servers[name]
        assert config.url is not None

        def needs_login(reason: str) -> None:
            refused()

        provider = HubOAuthProvider(config.url, self._store(name, identity), config.oauth,
                                    redirect_uri=DEFAULT_REDIRECT, on_needs_login=needs_login)
        async with user_session(config, provider, init_seconds=config.connect_timeout) as session:
            catalog = self.catalogs.get(name)
            if catalog is not None and not catalog.listed:
                catalog.update(await list_tools(session))
            yield session

    # ------------------------------------------------------------------ browser
    async def open_link(self, name: str, ticket: str, base: str) -> ConnectAnswer:
        """``GET /connect/NAME?t=…``: check the ticket, start the flow, redirect the browser."""
        server = self.config.enabled_servers().get(name)
        if server is None or not server.oauth_per_user or self._tg is None:
            return ConnectAnswer(404, f"No per-user server named {name}.")
        try:
            claims = self.links.redeem(ticket, name)
        except OAuthError as exc:
            return ConnectAnswer(403, str(exc))
        flow = Flow(name, claims.identity, claims.elicitation_id)
        redirect_uri = f"{base}{CALLBACK_PATH}"
        self._tg.start_soon(self._run, flow, server, redirect_uri)
        with anyio.move_on_after(PAGE_WAIT_SECONDS):
            await flow.redirected.wait()
        if flow.auth_url is not None and flow.state is not None and not flow.done.is_set():
            self._flows[flow.state] = flow
            return ConnectAnswer(302, "Continue at the authorization server.",
                                 location=flow.auth_url, cookie=flow.browser)
        if flow.done.is_set() and flow.error is None:
            return ConnectAnswer(200, f"Connected to {name}. You can close this tab.")
        return ConnectAnswer(502, f"Connecting {name} failed: {flow.error or 'no authorization URL'}")

    async def _run(self, flow: Flow, server: ServerConfig, redirect_uri: str) -> None:
        store = self._store(flow.server, flow.identity)
        await run_flow(flow, server, store, redirect_uri)
        if flow.state is not None:
            self._flows.pop(flow.state, None)
        if flow.error is None:
            self.pool.drop(flow.server, flow.identity)  # a session on old tokens goes
            if flow.tools is not None and flow.server in self.catalogs:
                self.catalogs[flow.server].update(flow.tools)
            self._connected.pop((flow.server, flow.identity), anyio.Event()).set()
            logger.info("%s connected %s", flow.identity, flow.server,
                        extra={"server": flow.server})

    async def finish(self, query: dict[str, str], browser: str | None) -> ConnectAnswer:
        """``GET /connect/callback``: the authorization server's redirect, from the same browser."""
        flow = self._flows.get(query.get("state") or "")
        if flow is None:
            return ConnectAnswer(400, "Unknown or finished connect flow.")
        if browser is None or not _same(browser, flow.browser):
            return ConnectAnswer(403, "This connect flow was started in another browser.")
        self._flows.pop(flow.state or "", None)
        code = query.get("code")
        item: AuthorizationCodeResult | OAuthError
        if code is None:
            item = OAuthError(f"authorization refused: {query.get('error') or 'no code'}")
        else:
            item = AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
        flow.deliver(item)
        with anyio.move_on_after(PAGE_WAIT_SECONDS * 2):
            await flow.done.wait()
        if flow.done.is_set() and flow.error is None:
            return ConnectAnswer(200, f"Connected to {flow.server}. You can close this tab "
                                      "and return to your client.")
        return ConnectAnswer(502, f"Connecting {flow.server} failed: {flow.error or 'timed out'}")


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


async def _elicitation_complete(call: CallContext, elicitation_id: str) -> None:
    """Tell the client the URL elicitation finished (``notifications/elicitation/complete``)."""
    try:
        await call.elicitation_complete(elicitation_id)
    except Exception:  # the notification is a courtesy; the call goes on
        logger.debug("elicitation/complete not delivered", exc_info=True)
