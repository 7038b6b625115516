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

Replicas: the link's single use and the flow in progress are kept in the
shared state store (``[state] url``), so the page, the callback and the waiting
call may each be served by a different replica.
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

from mcp_hub.config.model import HubConfig
from mcp_hub.pipeline.context import CallContext
from mcp_hub.redact import add_secrets, redact
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.state import EmbeddedState, StateBackend, StateUnavailable
from mcp_hub.upstream.oauth.attach import DEFAULT_REDIRECT, token_store, watch_logout
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.exchange import ExchangeAuth
from mcp_hub.upstream.oauth.provider import HubOAuthProvider
from mcp_hub.upstream.oauth.secretbox import SecretBox, load_key
from mcp_hub.upstream.oauth.tokens import TokenStore
from mcp_hub.upstream.peruser.caller_token import CallerTokens, exchange_refusal
from mcp_hub.upstream.peruser.catalog import PLACEHOLDER, Handler, PerUserCatalog
from mcp_hub.upstream.peruser.flows import (
    FLOW_SECONDS,
    FlowRecord,
    begin_flow,
    finish_flow,
    flow_key,
)
from mcp_hub.upstream.peruser.links import ConnectLinks
from mcp_hub.upstream.peruser.pool import UserSessions
from mcp_hub.upstream.peruser.relay import SessionRelay
from mcp_hub.upstream.peruser.session import list_tools, user_session

__all__ = ["CALLBACK_PATH", "ConnectAnswer", "PerUserServers", "hub_connected"]

logger = logging.getLogger("mcp_hub.upstream.peruser")

CALLBACK_PATH = "/connect/callback"
#: How long an elicited call waits for the person to finish connecting.
ELICIT_WAIT_SECONDS = 300.0
#: How long the page waits for the provider to produce the authorization URL.
PAGE_WAIT_SECONDS = 30.0
#: How often a waiting call looks for tokens stored by another replica's callback.
POLL_SECONDS = 1.0


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
    #: Not signed in, and an OpenID Connect sign-in can prove the link's identity.
    sign_in: bool = False


class PerUserServers:
    """Every per-user server of one Hub (see the module docstring)."""

    def __init__(self, config: HubConfig, registry: ToolRegistry) -> None:
        self.config = config
        self.registry = registry
        self.catalogs: dict[str, PerUserCatalog] = {}
        self._links: ConnectLinks | None = None
        self._box: SecretBox | None = None
        #: Where link uses and flows in progress live (the Hub sets its shared backend).
        self.state: StateBackend = EmbeddedState()
        self._connected: dict[tuple[str, str], anyio.Event] = {}
        self._relays: dict[tuple[str, str], SessionRelay] = {}  # one per open user session
        #: The callers' own tokens, for servers that exchange them (``subject = "caller"``).
        self.caller_tokens = CallerTokens()
        self.pool = UserSessions(self._open, max_sessions=config.hub.per_user_max_sessions,
                                 idle_seconds=config.hub.per_user_idle_seconds)
        self._tg: anyio.abc.TaskGroup | None = None
        self._servers(config)

    def _servers(self, config: HubConfig) -> None:
        for name, server in config.enabled_servers().items():
            if server.oauth_per_user and server.oauth.client_secret:
                add_secrets([server.oauth.client_secret])  # the manager never sees this server
            if server.oauth_per_user and server.oauth.idp_client_secret:
                add_secrets([server.oauth.idp_client_secret])
            if server.oauth_per_user and name not in self.catalogs:
                self.catalogs[name] = PerUserCatalog(
                    name, server, config.hub, self.registry, partial(self._handler, name))
                self.catalogs[name].register_placeholder()

    @property
    def links(self) -> ConnectLinks:
        if self._links is None:
            self._links = ConnectLinks(load_key(self.config.state_path()))
        return self._links

    @property
    def box(self) -> SecretBox:
        """Seals flow records with the token key (replicas share ``MCP_HUB_SECRET_KEY``)."""
        if self._box is None:
            self._box = SecretBox(load_key(self.config.state_path()))
        return self._box

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
                self.caller_tokens.forget(name)
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
        if self.config.servers[name].oauth.per_caller:
            return await self._exchanged_call(name, identity, raw, args, call)
        if not await self._store(name, identity).has_tokens():
            await self._ask_to_connect(name, identity, call)
        try:
            return await self._on_session(name, identity, raw, args, call)
        except Exception:
            if await self._store(name, identity).has_tokens():
                raise
        # The authorization server refused this identity's refresh token (the provider
        # dropped the tokens): connect again, then retry once.
        await self._ask_to_connect(name, identity, call)
        return await self._on_session(name, identity, raw, args, call)

    async def _exchanged_call(self, name: str, identity: str, raw: str, args: dict[str, Any],
                              call: CallContext) -> types.CallToolResult:
        """A call on the caller's session whose upstream token is exchanged from the caller's
        own: no connect page; a refused exchange is the call's error, never retried."""
        refused = self.caller_tokens.note(name, identity, call)
        if refused is not None:
            return _error(refused)
        try:
            live = self.caller_tokens.exchangers.get((name, identity))
            if live is not None:
                await live.token()  # renewed here, where a refusal can be answered
            return await self._on_session(name, identity, raw, args, call)
        except Exception as exc:
            answer = exchange_refusal(exc)
            if answer is None:
                raise
            logger.info("%s for %s: %s", name, identity, answer, extra={"server": name})
            return _error(answer)

    async def _on_session(self, name: str, identity: str, raw: str, args: dict[str, Any],
                          call: CallContext) -> types.CallToolResult:
        if raw == PLACEHOLDER:
            async with self.pool.use((name, identity)):
                pass  # opening the session lists the catalog
            return _text(f"Connected to {name}; its tools are listed now.")
        async with self.pool.use((name, identity)) as entry:
            assert entry.session is not None
            relay = self._relays.get((name, identity)) or SessionRelay(name)
            with relay.calling(call) as (on_progress, relays), \
                    anyio.fail_after(self.config.servers[name].max_call_seconds):
                result: types.CallToolResult = await entry.session.call_tool(
                    raw, args, progress_callback=on_progress)
                await relays.drain()
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
        if not await self._wait_connected(name, identity, connected):
            raise UrlElicitationRequiredError(
                [params], f"{name} is not connected yet: finish at the URL, then retry")
        await _elicitation_complete(call, claims.elicitation_id)

    async def _wait_connected(self, name: str, identity: str, connected: anyio.Event) -> bool:
        """Wait for this replica's callback (the event) or another's (tokens in the store)."""
        with anyio.move_on_after(ELICIT_WAIT_SECONDS):
            while not connected.is_set():
                with anyio.move_on_after(POLL_SECONDS):
                    await connected.wait()
                try:
                    if await self._store(name, identity).has_tokens():
                        self._connected.pop((name, identity), None)
                        return True
                except StateUnavailable:
                    pass  # the store may come back before the wait ends
        return connected.is_set()

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

        store = self._store(name, identity)
        provider: ExchangeAuth | HubOAuthProvider
        if config.oauth.per_caller:
            provider = ExchangeAuth(name, config.url, store, config.oauth,
                                    self.caller_tokens.source(name, identity))
            await provider.token()  # a refusal is the call's answer, before any session
            self.caller_tokens.exchangers[key] = provider
        else:
            provider = HubOAuthProvider(config.url, store, config.oauth,
                                        redirect_uri=DEFAULT_REDIRECT, on_needs_login=needs_login)
        relay = self._relays[key] = SessionRelay(name)
        try:
            async with user_session(config, provider, init_seconds=config.connect_timeout,
                                    logging_callback=relay.on_log,
                                    sampling_callback=relay.on_sampling,
                                    elicitation_callback=relay.on_elicitation,
                                    list_roots_callback=relay.on_list_roots) as session, \
                    anyio.create_task_group() as watch:
                catalog = self.catalogs.get(name)
                if catalog is not None and not catalog.listed:
                    catalog.update(await list_tools(session))
                # The user's tokens deleted (logout --identity, any replica): close the session.
                watch.start_soon(watch_logout, store, refused)
                try:
                    yield session
                finally:
                    watch.cancel_scope.cancel()
        finally:
            if self._relays.get(key) is relay:
                del self._relays[key]
            if self.caller_tokens.exchangers.get(key) is provider:
                del self.caller_tokens.exchangers[key]

    # ------------------------------------------------------------------ browser
    async def open_link(self, name: str, ticket: str, base: str,
                        signed_in: str | None) -> ConnectAnswer:
        """``GET /connect/NAME?t=…``: check the ticket, begin the flow, redirect the browser.

        ``signed_in`` is the identity the browser signed in to the hub as (its identity
        cookie). The flow begins only when it is the ticket's identity: a link opened by
        anyone else stores nothing, so nobody can have another person's upstream account
        connected under their own identity by sending them a link."""
        server = self.config.enabled_servers().get(name)
        if server is None or not server.oauth_per_user or self._tg is None:
            return ConnectAnswer(404, f"No per-user server named {name}.")
        try:
            owner = self.links.check(ticket, name).identity
        except OAuthError as exc:
            return ConnectAnswer(403, str(exc))
        refused = _not_owner(owner, signed_in)
        if refused is not None:
            if signed_in is not None:
                logger.warning("a connect link of %s for %s was opened by a browser signed in as "
                               "%s: refused", owner, name, signed_in, extra={"server": name})
            return refused
        try:
            claims = await self.links.redeem(ticket, name, self.state)
        except StateUnavailable:
            return ConnectAnswer(503, "The hub's shared state store is unavailable; try again.")
        except OAuthError as exc:
            return ConnectAnswer(403, str(exc))
        redirect_uri = f"{base}{CALLBACK_PATH}"
        store = self._store(name, claims.identity)
        begun = await begin_flow(server, store, redirect_uri, PAGE_WAIT_SECONDS)
        if begun.auth_url and begun.state and begun.verifier:
            record = FlowRecord(name, claims.identity, claims.elicitation_id, redirect_uri,
                                begun.verifier)
            try:
                await self.state.put(flow_key(begun.state), record.seal(self.box), FLOW_SECONDS)
            except StateUnavailable:
                return ConnectAnswer(503, "The hub's shared state store is unavailable; try again.")
            return ConnectAnswer(302, "Continue at the authorization server.",
                                 location=begun.auth_url, cookie=record.browser)
        if begun.error is None:  # the upstream let the session in without a login
            self._connected_now(name, claims.identity, begun.tools)
            return ConnectAnswer(200, f"Connected to {name}. You can close this tab.")
        return ConnectAnswer(502, f"Connecting {name} failed: {begun.error}")

    def _connected_now(self, name: str, identity: str, tools: list[types.Tool] | None) -> None:
        self.pool.drop(name, identity)  # a session on old tokens goes
        if tools is not None and name in self.catalogs:
            self.catalogs[name].update(tools)
        self._connected.pop((name, identity), anyio.Event()).set()
        logger.info("%s connected %s", identity, name, extra={"server": name})

    async def finish(self, query: dict[str, str], browser: str | None) -> ConnectAnswer:
        """``GET /connect/callback``: the authorization server's redirect, from the same browser.

        Any replica can answer it: the flow's record comes from the shared store."""
        key = flow_key(query.get("state") or "")
        try:
            blob = await self.state.get(key)
            record = FlowRecord.unseal(self.box, blob) if blob is not None else None
            if record is not None and browser is not None and _same(browser, record.browser):
                if await self.state.take(key) is None:
                    record = None  # another request finished it first
            elif record is not None:
                return ConnectAnswer(403, "This connect flow was started in another browser.")
        except StateUnavailable:
            return ConnectAnswer(503, "The hub's shared state store is unavailable; try again.")
        except OAuthError as exc:
            return ConnectAnswer(400, str(exc))
        if record is None:
            return ConnectAnswer(400, "Unknown or finished connect flow.")
        return await self._finish(record, query)

    async def _finish(self, record: FlowRecord, query: dict[str, str]) -> ConnectAnswer:
        name = record.server
        server = self.config.enabled_servers().get(name)
        if server is None or not server.oauth_per_user:
            return ConnectAnswer(404, f"No per-user server named {name}.")
        code = query.get("code")
        if code is None:
            error = f"authorization refused: {query.get('error') or 'no code'}"
            return ConnectAnswer(502, f"Connecting {name} failed: {error}")
        result = AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
        try:
            tools = await finish_flow(server, self._store(name, record.identity), record, result)
        except TimeoutError:
            return ConnectAnswer(502, f"Connecting {name} failed: not completed in time")
        except Exception as exc:
            error = redact(str(exc)) or type(exc).__name__
            logger.info("connecting %s for %s failed: %s", name, record.identity, error,
                        extra={"server": name})
            return ConnectAnswer(502, f"Connecting {name} failed: {error}")
        self._connected_now(name, record.identity, tools)
        return ConnectAnswer(200, f"Connected to {name}. You can close this tab "
                                  "and return to your client.")


def _not_owner(owner: str, signed_in: str | None) -> ConnectAnswer | None:
    """The refusal when the browser is not signed in as the link's ``owner`` (None: it is)."""
    if signed_in is None:
        if owner.startswith("token:"):
            return ConnectAnswer(401, "Sign in to the hub in this browser first: open the hub's "
                                      "page at /?token=YOUR_TOKEN, then open this link again.")
        return ConnectAnswer(401, "Sign in to the hub in this browser first, then open this "
                                  "link again.", sign_in=True)
    if not _same(owner, signed_in):
        return ConnectAnswer(403, f"This connect link was made for another user, and this browser "
                                  f"is signed in to the hub as {signed_in}. Nothing was connected: "
                                  "use only links your own client shows you.")
    return None


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
