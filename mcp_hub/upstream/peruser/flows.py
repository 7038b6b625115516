"""The browser part of connecting an account: authorization code + PKCE at the hub's URLs.

The flow has two halves that may run on different replicas:

- :func:`begin_flow` (``/connect/NAME``): the SDK's ``OAuthClientProvider`` (as
  :class:`~mcp_hub.upstream.oauth.provider.HubOAuthProvider`) opens a session
  with the upstream, meets its 401, discovers the authorization server,
  registers the client if needed and builds the authorization URL (PKCE S256,
  ``state``, ``resource``). Then it stops: nothing waits in memory for the code.
  What the other half needs (the PKCE verifier, the identity, the redirect URI
  and a random value the browser keeps in a cookie) becomes a :class:`FlowRecord`,
  sealed with the token key and kept in the shared state store under the
  flow's ``state`` until it expires.
- :func:`finish_flow` (``/connect/callback``, on whichever replica the load
  balancer picks): with the record taken from the store, a provider exchanges
  the code with the stored verifier, stores the tokens under the identity that
  asked and lists the upstream's tools.

The registered client and the discovered metadata live in the token store,
which every replica sharing ``[state] url`` sees.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass, field
from urllib.parse import urlencode, urljoin

import anyio
import mcp.types as types
from mcp.client.auth import PKCEParameters
from mcp.client.auth.utils import validate_authorization_response_iss
from mcp.shared.auth import AuthorizationCodeResult

from mcp_hub.config.model import ServerConfig
from mcp_hub.redact import redact
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.provider import HubOAuthProvider, LoginHandlers
from mcp_hub.upstream.oauth.secretbox import SecretBox
from mcp_hub.upstream.oauth.tokens import TokenStore
from mcp_hub.upstream.peruser.session import list_tools, user_session

__all__ = ["FLOW_SECONDS", "Begun", "FlowRecord", "begin_flow", "finish_flow", "flow_key"]

#: How long a person has, from opening the link to the redirect back to the hub.
FLOW_SECONDS = 300.0


def flow_key(state: str) -> str:
    """The state store key of the flow with OAuth ``state`` (hashed: the key is no secret)."""
    return "peruser/flow/" + hashlib.sha256(state.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class FlowRecord:
    """What the callback needs to finish a flow another replica may have begun."""

    server: str
    identity: str
    elicitation_id: str
    redirect_uri: str
    verifier: str
    #: Random; the browser that opened the link carries it in a cookie.
    browser: str = field(default_factory=lambda: secrets.token_urlsafe(24))

    def seal(self, box: SecretBox) -> bytes:
        return box.seal(json.dumps(asdict(self)).encode())

    @classmethod
    def unseal(cls, box: SecretBox, blob: bytes) -> FlowRecord:
        try:
            return cls(**json.loads(box.open(blob)))
        except (ValueError, TypeError):
            raise OAuthError("the connect flow's record is not readable") from None


@dataclass(eq=False)
class Begun:
    """The first half's outcome: an authorization URL, or a session that needed no login."""

    auth_url: str | None = None
    state: str | None = None
    verifier: str | None = None
    tools: list[types.Tool] | None = None
    error: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)


async def _never() -> AuthorizationCodeResult:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _unused(url: str) -> None:
    """The providers below do their own redirect step."""


class _BeginProvider(HubOAuthProvider):
    """Builds the authorization URL as the SDK does, records it and the verifier, and waits
    (forever: :func:`begin_flow` cancels it) instead of expecting the code in this process."""

    begun: Begun

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        ctx = self.context
        if ctx.client_info is None or not ctx.client_metadata.redirect_uris:
            raise OAuthError("no registered client to authorize")
        if ctx.oauth_metadata and ctx.oauth_metadata.authorization_endpoint:
            endpoint = str(ctx.oauth_metadata.authorization_endpoint)
        else:
            endpoint = urljoin(ctx.get_authorization_base_url(ctx.server_url), "/authorize")
        pkce, state = PKCEParameters.generate(), secrets.token_urlsafe(32)
        params = {"response_type": "code", "client_id": ctx.client_info.client_id,
                  "redirect_uri": str(ctx.client_metadata.redirect_uris[0]), "state": state,
                  "code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
        if ctx.should_include_resource_param(ctx.protocol_version):
            params["resource"] = ctx.get_resource_url()
        if ctx.client_metadata.scope:
            params["scope"] = ctx.client_metadata.scope
            if "offline_access" in ctx.client_metadata.scope.split():
                params["prompt"] = "consent"
        self.begun.auth_url = f"{endpoint}?{urlencode(params)}"
        self.begun.state, self.begun.verifier = state, pkce.code_verifier
        self.begun.ready.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


class _FinishProvider(HubOAuthProvider):
    """Exchanges the callback's code with the verifier of the flow's record."""

    result: AuthorizationCodeResult
    verifier: str

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        validate_authorization_response_iss(self.result.iss, self.context.oauth_metadata)
        if not self.result.code:
            raise OAuthError("no authorization code received")
        return self.result.code, self.verifier


async def _fit_client(store: TokenStore, config: ServerConfig, redirect_uri: str) -> None:
    """Forget a client registered for another redirect URI (the login's loopback one)."""
    if config.oauth.client_id:
        return
    client = await store.get_client_info()
    if client is None or client.client_id == config.oauth.client_metadata_url:
        return
    if [str(u) for u in client.redirect_uris or []] != [redirect_uri]:
        await store.clear_client_info()


def _provider(cls: type[HubOAuthProvider], config: ServerConfig, store: TokenStore,
              redirect_uri: str) -> HubOAuthProvider:
    assert config.url is not None
    return cls(config.url, store, config.oauth, redirect_uri=redirect_uri,
               handlers=LoginHandlers(_unused, _never))


async def begin_flow(config: ServerConfig, store: TokenStore, redirect_uri: str,
                     wait_seconds: float) -> Begun:
    """Discover, register and build the authorization URL (see the module docstring)."""
    provider = _provider(_BeginProvider, config, store, redirect_uri)
    assert isinstance(provider, _BeginProvider)
    begun = provider.begun = Begun()

    async def run() -> None:
        try:
            await _fit_client(store, config, redirect_uri)
            await store.clear_tokens()  # a connect replaces what this identity had
            async with user_session(config, provider, init_seconds=wait_seconds) as session:
                begun.tools = await list_tools(session)
        except Exception as exc:
            begun.error = redact(str(exc)) or type(exc).__name__
        finally:
            begun.ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.move_on_after(wait_seconds):
            await begun.ready.wait()
        tg.cancel_scope.cancel()
    if not begun.ready.is_set():
        begun.error = "the authorization server did not answer in time"
    return begun


async def finish_flow(config: ServerConfig, store: TokenStore, record: FlowRecord,
                      result: AuthorizationCodeResult) -> list[types.Tool]:
    """Exchange the code, store the tokens, list the tools; raises on any failure."""
    provider = _provider(_FinishProvider, config, store, record.redirect_uri)
    assert isinstance(provider, _FinishProvider)
    provider.result, provider.verifier = result, record.verifier
    with anyio.fail_after(FLOW_SECONDS):
        async with user_session(config, provider, init_seconds=FLOW_SECONDS) as session:
            return await list_tools(session)
