"""``mcp-hub login NAME`` and ``mcp-hub logout NAME``: the hub-wide OAuth login.

The login prints the authorization URL alone on one line of stdout (and opens a
browser unless told not to), waits on a loopback port for the redirect, and
stores the tokens; it then initializes a session and lists the tools to prove
they work. A running hub waiting in ``needs_login`` sees the new tokens within a
second. Everything else goes to stderr.
"""

from __future__ import annotations

import webbrowser
from contextlib import AsyncExitStack
from typing import Any, TextIO
from urllib.parse import urlparse

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config.model import ServerConfig
from mcp_hub.config.oauth import EXCHANGE_GRANTS
from mcp_hub.redact import add_secrets, redact
from mcp_hub.upstream.oauth.callback import CallbackServer
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.exchange import ExchangeAuth, file_subject
from mcp_hub.upstream.oauth.machine import machine_auth
from mcp_hub.upstream.oauth.provider import (
    HubOAuthProvider,
    LoginHandlers,
)
from mcp_hub.upstream.oauth.tokens import TokenStore
from mcp_hub.upstream.sessions.lenient import upstream_session
from mcp_hub.upstream.sessions.modern import open_session

__all__ = ["login", "logout"]


async def logout(store: TokenStore) -> bool:
    """Delete the stored tokens; True if there were any. Running hubs sharing the store
    close their sessions on these tokens within a second (``attach.watch_logout``)."""
    await store.set_pending_scope(None)
    return await store.clear_tokens()


async def _callback_server(store: TokenStore, config: ServerConfig) -> CallbackServer:
    """Listen where the registered client's redirect URI points, if it names a port."""
    wanted = config.oauth.callback_port
    client = await store.get_client_info()
    stored_port = None
    if client is not None and client.redirect_uris:
        stored_port = urlparse(str(client.redirect_uris[0])).port
    server = await CallbackServer.open(wanted or stored_port or 0)
    registered = client is not None and not config.oauth.client_id and (
        client.client_id != config.oauth.client_metadata_url)
    if registered and stored_port != server.port:
        await store.clear_client_info()  # registered for another redirect URI: register again
    return server


async def login(name: str, config: ServerConfig, store: TokenStore, *, open_browser: bool,
                out: TextIO, wait_seconds: float = 300.0) -> int:
    """Run the flow for server ``name`` and store its tokens; returns its tool count."""
    assert config.url is not None
    if config.oauth.client_secret:
        add_secrets([config.oauth.client_secret])
    await store.clear_tokens()
    if config.oauth.grant in EXCHANGE_GRANTS:
        return await exchange_login(name, config, store, wait_seconds)
    if config.oauth.machine_grant:
        provider: Any = machine_auth(config.url, store, config.oauth)
        with anyio.fail_after(wait_seconds):
            tools = await _session(config, provider)
        _check_stored(store)
        return tools
    server = await _callback_server(store, config)

    async def redirect(url: str) -> None:
        print(url, file=out, flush=True)
        if open_browser:
            await anyio.to_thread.run_sync(webbrowser.open, url)

    provider = HubOAuthProvider(config.url, store, config.oauth,
                                redirect_uri=server.redirect_uri,
                                handlers=LoginHandlers(redirect, server.wait))
    failure: OAuthError | None = None
    tools = 0
    async with server.listener, anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            with anyio.fail_after(wait_seconds):
                tools = await _session(config, provider)
        except OAuthError as exc:
            failure = exc
        except TimeoutError:
            failure = OAuthError(f"login not completed within {wait_seconds:g} s")
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    _check_stored(store)
    return tools


async def exchange_login(name: str, config: ServerConfig, store: TokenStore,
                         wait_seconds: float) -> int:
    """An exchange grant needs no person: with ``subject_token_file`` the exchange runs
    now (proving it works); with ``subject = "caller"`` there is nothing to log in."""
    assert config.url is not None
    settings = config.oauth
    if settings.subject_token_file is None:
        raise OAuthError(f'{name} exchanges each caller\'s own token (subject = "caller"): '
                         "there is no hub-wide login; callers signed in with [auth] reach it")
    add_secrets([s for s in (settings.client_secret, settings.idp_client_secret) if s])
    auth = ExchangeAuth(name, config.url, store, settings,
                        file_subject(settings.subject_token_file))
    with anyio.fail_after(wait_seconds):
        tools = await _session(config, auth)
    _check_stored(store)
    return tools


def _check_stored(store: TokenStore) -> None:
    """A login whose tokens did not reach the store (shared store down) is no login."""
    if store.unsaved is not None:
        raise OAuthError(f"the login worked but its tokens could not be stored in {store.where}; "
                         "nothing was saved: fix the store and log in again")


async def _session(config: ServerConfig, auth: httpx2.Auth) -> int:
    """Open a session through ``auth`` (which runs the flow) and count the tools.

    The session is opened the way the hub will open it: per ``[servers.NAME]
    protocol`` (``initialize``, ``server/discover``, or discovery with a fallback),
    so a 2026-07-28-only server is checked in its own era.
    """
    assert config.url is not None
    try:
        async with AsyncExitStack() as stack:
            if config.transport == "sse":
                streams = await stack.enter_async_context(sse_client(
                    config.url, headers=dict(config.headers) or None,
                    timeout=config.connect_timeout, auth=auth))
            else:
                client = await stack.enter_async_context(httpx2.AsyncClient(
                    headers=dict(config.headers) or None, auth=auth,
                    timeout=httpx2.Timeout(config.connect_timeout, read=300.0)))
                streams = await stack.enter_async_context(
                    streamable_http_client(config.url, http_client=client))
            session = await stack.enter_async_context(
                upstream_session(streams[0], streams[1], server=config.url))
            await open_session(session, config.protocol)
            return len((await session.list_tools()).tools)
    except OAuthError:
        raise
    except Exception as exc:  # the SDK's flow errors, HTTP errors, task groups of them
        raise OAuthError(f"login failed: {_reason(exc)}") from None


def _reason(exc: BaseException) -> str:
    """The innermost meaningful message of ``exc``, redacted."""
    leaf: BaseException = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if isinstance(leaf, OAuthError):
        return str(leaf)
    text = str(leaf) or type(leaf).__name__
    return redact(text)


