"""The browser part of connecting an account: authorization code + PKCE at the hub's URLs.

A redeemed connect link starts a :class:`Flow`: the SDK's ``OAuthClientProvider``
(as :class:`~mcp_hub.upstream.oauth.provider.HubOAuthProvider`) opens a session
with the upstream, meets its 401, discovers the authorization server and builds
the authorization URL (PKCE S256, ``state``, ``resource``). The page answers the
browser with a redirect there, and sets a cookie that ties the browser to this
flow. The authorization server sends the browser back to ``/connect/callback``;
the callback must come from the same browser (the cookie) with the flow's
``state``, and its code goes to the provider, which exchanges it and stores
the tokens under the identity that asked.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlparse

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.auth import AuthorizationCodeResult

from mcp_hub.config import ServerConfig
from mcp_hub.redact import redact
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.provider import HubOAuthProvider, LoginHandlers
from mcp_hub.upstream.oauth.tokens import TokenStore
from mcp_hub.upstream.peruser.session import list_tools, user_session

__all__ = ["FLOW_SECONDS", "Flow", "run_flow"]

logger = logging.getLogger("mcp_hub.upstream.peruser")

#: How long a person has, from opening the link to the redirect back to the hub.
FLOW_SECONDS = 300.0


@dataclass(eq=False)
class Flow:
    """One identity connecting one server, from the link to the stored tokens."""

    server: str
    identity: str
    elicitation_id: str
    #: Random; the browser that opened the link carries it in a cookie.
    browser: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    auth_url: str | None = None
    state: str | None = None
    redirected: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    error: str | None = None
    tools: list[types.Tool] | None = None
    _codes: tuple[MemoryObjectSendStream[AuthorizationCodeResult | OAuthError],
                  MemoryObjectReceiveStream[AuthorizationCodeResult | OAuthError]] = field(
        default_factory=lambda: anyio.create_memory_object_stream[
            AuthorizationCodeResult | OAuthError](1))

    async def _redirect(self, url: str) -> None:
        self.auth_url = url
        self.state = parse_qs(urlparse(url).query).get("state", [None])[0]
        self.redirected.set()

    async def _code(self) -> AuthorizationCodeResult:
        item = await self._codes[1].receive()
        if isinstance(item, OAuthError):
            raise item
        return item

    def deliver(self, item: AuthorizationCodeResult | OAuthError) -> bool:
        """Hand the redirect's code (or refusal) to the provider; False if one already came."""
        try:
            self._codes[0].send_nowait(item)
        except anyio.WouldBlock:
            return False
        return True


async def _fit_client(store: TokenStore, config: ServerConfig, redirect_uri: str) -> None:
    """Forget a client registered for another redirect URI (the login's loopback one)."""
    if config.oauth.client_id:
        return
    client = await store.get_client_info()
    if client is None or client.client_id == config.oauth.client_metadata_url:
        return
    if [str(u) for u in client.redirect_uris or []] != [redirect_uri]:
        await store.clear_client_info()


async def run_flow(flow: Flow, config: ServerConfig, store: TokenStore, redirect_uri: str) -> None:
    """Run the flow to the end; ``flow.done`` is set with ``flow.error`` None on success."""
    assert config.url is not None
    try:
        await _fit_client(store, config, redirect_uri)
        await store.clear_tokens()  # a connect replaces what this identity had
        provider = HubOAuthProvider(config.url, store, config.oauth, redirect_uri=redirect_uri,
                                    handlers=LoginHandlers(flow._redirect, flow._code))
        with anyio.fail_after(FLOW_SECONDS):
            async with user_session(config, provider, init_seconds=FLOW_SECONDS) as session:
                flow.tools = await list_tools(session)
    except TimeoutError:
        flow.error = "the connection was not completed in time"
    except Exception as exc:
        flow.error = redact(str(exc)) or type(exc).__name__
        logger.info("connecting %s for %s failed: %s", flow.server, flow.identity, flow.error,
                    extra={"server": flow.server})
    finally:
        flow.done.set()
        flow.redirected.set()
