"""The SDK's ``OAuthClientProvider`` with what a long-running hub adds.

- The access token is refreshed a little *before* it expires (the SDK waits until
  after), and the expiry survives a restart (kept next to the token).
- A 401 on a request sent with a token first triggers one refresh and one retry of
  that request (the server refused it unprocessed, so resending is safe); only if
  that fails does the full flow start.
- Without a person at hand (the running hub), the step that would open a browser
  raises :class:`NeedsLogin` instead, after forgetting the refused tokens and
  noting the scope a login must ask for: the server waits in ``needs_login``
  rather than retrying against the token endpoint.
- Configured scopes, a pre-registered client and ``resource_param = false``.
- ``dpop = true``: every token and resource request goes out with a DPoP proof
  (:mod:`.dpop`), a nonce challenge answered once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, fields
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import union_scopes
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    ProtectedResourceMetadata,
)

from mcp_hub.config.oauth import OAuthSettings
from mcp_hub.upstream.oauth.dpop import DpopSigner, is_token_request
from mcp_hub.upstream.oauth.errors import NeedsLogin, OAuthError
from mcp_hub.upstream.oauth.tokens import TokenStore

__all__ = ["HubClientCredentialsProvider", "HubOAuthProvider", "LoginHandlers"]

#: Refresh this long before expiry at most; a fifth of the lifetime for short-lived tokens.
_MAX_REFRESH_MARGIN = 60.0


@dataclass
class LoginHandlers:
    """The two interactive steps of the authorization-code flow (``mcp-hub login``)."""

    redirect: Callable[[str], Awaitable[None]]
    callback: Callable[[], Awaitable[AuthorizationCodeResult]]


@dataclass
class _HubContext(OAuthContext):
    """The SDK's context with the RFC 8707 ``resource`` parameter switchable off."""

    resource_param: bool = True

    def should_include_resource_param(self, protocol_version: str | None = None) -> bool:
        return self.resource_param and super().should_include_resource_param(protocol_version)


class _HubFlow(OAuthClientProvider):
    """The additions shared by the authorization-code and client-credentials providers."""

    hub_store: TokenStore
    settings: OAuthSettings
    on_needs_login: Callable[[str], None] | None

    def _setup(self, store: TokenStore, settings: OAuthSettings,
               on_needs_login: Callable[[str], None] | None) -> None:
        self.hub_store = store
        self.settings = settings
        self.on_needs_login = on_needs_login
        self.dpop = DpopSigner(store) if settings.dpop else None
        self._legacy_candidate: str | None = None
        self._legacy_issuer: str | None = None
        ctx = self.context
        values = {f.name: getattr(ctx, f.name) for f in fields(ctx) if f.init}
        self.context = _HubContext(**values, resource_param=settings.resource_param)

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.hub_store.expires_at is not None:
            self.context.token_expiry_time = self.hub_store.expires_at
        if self.context.oauth_metadata is None:
            await self._restore_discovery()

    async def _restore_discovery(self) -> None:
        """The metadata found when the tokens were obtained: the SDK keeps it in memory only,
        and without it a refresh after a restart would go to the MCP server's origin."""
        data = await self.hub_store.get_discovery()
        if not data:
            return
        if data.get("oauth_metadata"):
            self.context.oauth_metadata = OAuthMetadata.model_validate(data["oauth_metadata"])
        if data.get("resource_metadata"):
            self.context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
                data["resource_metadata"])
        self.context.auth_server_url = data.get("auth_server_url")

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        ctx = self.context
        await self.hub_store.set_discovery({
            "oauth_metadata": ctx.oauth_metadata and ctx.oauth_metadata.model_dump(
                mode="json", exclude_none=True),
            "resource_metadata": ctx.protected_resource_metadata and
            ctx.protected_resource_metadata.model_dump(mode="json", exclude_none=True),
            "auth_server_url": ctx.auth_server_url,
        })

    def _expiring(self) -> bool:
        """True when the access token is within its refresh margin of expiring."""
        expiry, token = self.context.token_expiry_time, self.context.current_tokens
        if expiry is None or token is None:
            return False
        margin = min(_MAX_REFRESH_MARGIN, 0.2 * float(token.expires_in or 0))
        return time.time() >= expiry - margin

    async def _perform_authorization(self) -> httpx2.Request:
        scope = self.settings.scope or self.context.client_metadata.scope
        self.context.client_metadata.scope = union_scopes(
            scope, await self.hub_store.get_pending_scope())
        return await super()._perform_authorization()

    async def _precheck(self) -> None:
        """Runs before each request's flow; the hub's provider refuses early without tokens."""

    async def _auth_flow(self, request: httpx2.Request
                         ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        await self._precheck()
        await self.hub_store.flush()
        if self._initialized and self._expiring() and self.context.can_refresh_token():
            self.context.token_expiry_time = 1.0  # in the past (0 means "no expiry")
        sent_with_token = "Authorization" in request.headers or (
            self._initialized and self.context.is_token_valid())
        retried = False
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield await self._signed(outgoing, request)
                if self.dpop is not None and await self.dpop.challenged(outgoing, response):
                    response = yield await self._signed(outgoing, request)  # once, with the nonce
                response = await self._checked_response(outgoing, response)
                await self._note_legacy_metadata(outgoing, response)
                restart = False
                if (outgoing is request and response.status_code == 401 and not retried
                        and sent_with_token and self.context.can_refresh_token()):
                    retried = restart = True  # one refresh, then resend the refused request
                    self.context.token_expiry_time = 1.0
                else:
                    try:
                        outgoing = await flow.asend(response)
                    except StopAsyncIteration:
                        return
                    except OAuthFlowError:
                        if not self._adopt_legacy_issuer():
                            raise
                        restart = True
                if restart:
                    await flow.aclose()
                    request.headers.pop("Authorization", None)
                    flow = super()._auth_flow(request)
                    outgoing = await flow.__anext__()
        finally:
            await flow.aclose()

    async def _signed(self, outgoing: httpx2.Request, request: httpx2.Request) -> httpx2.Request:
        """``outgoing`` with a fresh DPoP proof where one belongs (``dpop = true``)."""
        if self.dpop is not None:
            await self.dpop.sign(outgoing, resource=outgoing is request)
        return outgoing

    async def _checked_response(self, sent: httpx2.Request, response: httpx2.Response
                                ) -> httpx2.Response:
        """A token endpoint's answer as the SDK should read it: DPoP-bound tokens only
        (``dpop = true``)."""
        if self.dpop is not None and is_token_request(sent):
            return await self.dpop.token_response(response)
        return response

    async def _note_legacy_metadata(self, sent: httpx2.Request, response: httpx2.Response) -> None:
        """Remember the issuer of metadata the 2025-03-26 fallback found at the server's origin."""
        if (self.context.auth_server_url is None and response.status_code == 200
                and sent.url.path.startswith("/.well-known/oauth-authorization-server")
                and _origin(str(sent.url)) == _origin(self.context.server_url)):
            try:
                await response.aread()
                issuer = response.json().get("issuer")
            except (ValueError, AttributeError):
                return
            if isinstance(issuer, str) and _origin(issuer) == _origin(self.context.server_url):
                self._legacy_candidate = issuer

    def _adopt_legacy_issuer(self) -> bool:
        """2025-03-26 servers publish metadata at their origin whose ``issuer`` may carry a
        path (that spec predates issuer validation). Accept such an issuer once, only when
        it is on the MCP server's own origin, where the metadata was fetched from."""
        candidate = self._legacy_candidate
        if candidate is None or self._legacy_issuer == candidate:
            return False
        self._legacy_issuer = candidate
        return True

    def _expected_issuer(self) -> str:
        if self.context.auth_server_url is None and self._legacy_issuer:
            return self._legacy_issuer
        return super()._expected_issuer()

    async def _need_person(self, url: str) -> None:
        """The non-interactive redirect step: note the wanted scope, drop tokens, stop."""
        scope = parse_qs(urlparse(url).query).get("scope", [None])[0]
        await self.hub_store.set_pending_scope(scope)
        await self.hub_store.clear_tokens()
        reason = "the authorization server wants a person to sign in"
        if self.on_needs_login is not None:
            self.on_needs_login(reason)
        raise NeedsLogin(self.hub_store.server, reason)


class HubOAuthProvider(_HubFlow):
    """Authorization code with PKCE: pre-registered client, CIMD or dynamic registration."""

    def __init__(self, server_url: str, store: TokenStore, settings: OAuthSettings, *,
                 redirect_uri: str, handlers: LoginHandlers | None = None,
                 on_needs_login: Callable[[str], None] | None = None) -> None:
        metadata = OAuthClientMetadata(
            client_name=settings.client_name,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=settings.scope,
        )
        redirect: Callable[[str], Awaitable[None]] = self._need_person
        callback: Callable[[], Awaitable[AuthorizationCodeResult]] = _no_callback
        if handlers is not None:
            redirect, callback = handlers.redirect, handlers.callback
        super().__init__(server_url, metadata, store, redirect, callback,
                         client_metadata_url=settings.client_metadata_url)
        self._setup(store, settings, on_needs_login)
        self.interactive = handlers is not None

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.settings.client_id:
            self.context.client_info = self._pre_registered()

    def _pre_registered(self) -> OAuthClientInformationFull:
        method: Any = self.settings.token_endpoint_auth_method or (
            "client_secret_basic" if self.settings.client_secret else "none")
        return OAuthClientInformationFull(
            client_id=self.settings.client_id or "",
            client_secret=self.settings.client_secret,
            redirect_uris=self.context.client_metadata.redirect_uris,
            token_endpoint_auth_method=method,
            grant_types=["authorization_code", "refresh_token"],
        )

    async def _precheck(self) -> None:
        if self.interactive:
            return
        if not self._initialized:
            async with self.context.lock:
                await self._initialize()
        if self.context.current_tokens is None:
            # Nothing to refresh and nobody to log in: say so before any network traffic.
            if self.on_needs_login is not None:
                self.on_needs_login("no stored token")
            raise NeedsLogin(self.hub_store.server)


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parsed = urlparse(url)
    return parsed.scheme, parsed.hostname, parsed.port


async def _no_callback() -> AuthorizationCodeResult:
    raise OAuthError("a running hub has no browser to finish a login in")


class HubClientCredentialsProvider(_HubFlow, ClientCredentialsOAuthProvider):
    """Machine to machine: the client-credentials grant with a configured id and secret."""

    def __init__(self, server_url: str, store: TokenStore, settings: OAuthSettings) -> None:
        method: Any = (settings.client_auth or settings.token_endpoint_auth_method
                       or "client_secret_basic")
        ClientCredentialsOAuthProvider.__init__(
            self, server_url, store, settings.client_id or "", settings.client_secret or "",
            token_endpoint_auth_method=method, scope=settings.scope, issuer=settings.issuer)
        self._setup(store, settings, None)
