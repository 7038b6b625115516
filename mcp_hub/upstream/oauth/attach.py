"""What the transports and the supervisor use: the ``httpx`` auth of an OAuth server,
its token store, the wait for a login while it is ``needs_login``, and the watch that
ends a live session once its tokens are deleted.

A logout (``mcp-hub logout NAME``, run in any process) or a revocation that deletes
the stored tokens must not leave a running hub serving on the tokens it still holds
in memory. Every live session of an OAuth server, hub-wide or per user, polls its
token record every :data:`LOGOUT_POLL_SECONDS` (one small file read, or one Redis
``GET`` with ``[state] url``, so every replica sees the same record); when tokens
it had seen are gone it ends the session: the server shows ``needs_login`` and no
call goes out with the old token. A store that cannot be reached is not a logout.

A ``jwt_bearer`` server parked after a refused grant also watches its
``assertion_file`` (one ``stat`` per :data:`LOGIN_POLL_SECONDS`): once the platform
has rotated it, the grant is tried once more; an unchanged file is never sent again.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio

from mcp_hub.config.model import ServerConfig
from mcp_hub.config.oauth import EXCHANGE_GRANTS
from mcp_hub.state import StateUnavailable
from mcp_hub.upstream.oauth.exchange import ExchangeAuth, file_subject
from mcp_hub.upstream.oauth.kvstore import StateStore
from mcp_hub.upstream.oauth.machine import assertion_sent, file_signature, machine_auth
from mcp_hub.upstream.oauth.provider import HubOAuthProvider, _HubFlow
from mcp_hub.upstream.oauth.secretbox import SecretBox
from mcp_hub.upstream.oauth.tokens import (
    HUB_IDENTITY,
    TokenStore,
    describe_location,
    open_store,
    store_location,
)
from mcp_hub.upstream.status import UpstreamStatus

__all__ = ["DEFAULT_REDIRECT", "LOGOUT_POLL_SECONDS", "hub_auth", "login_wanted",
           "oauth_status", "token_store", "token_store_status", "wait_for_login",
           "watch_logout"]

logger = logging.getLogger(__name__)

#: The redirect URI a running hub puts in its (never used) authorization requests.
DEFAULT_REDIRECT = "http://127.0.0.1/callback"
#: How often a ``needs_login`` server looks for tokens written by ``mcp-hub login``.
LOGIN_POLL_SECONDS = 1.0
#: How often a live OAuth session checks that its tokens are still stored (a logout).
LOGOUT_POLL_SECONDS = 1.0


def _default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "mcp-hub"


@functools.lru_cache(maxsize=8)
def _store_for(state_dir: Path, state_url: str | None = None) -> tuple[StateStore, SecretBox]:
    return open_store(state_dir, state_url)


def token_store(name: str, config: ServerConfig, identity: str = HUB_IDENTITY) -> TokenStore:
    """The encrypted token store of server ``name`` (hub-wide unless ``identity`` is given):
    in the embedded store, or in Redis when ``[state] url`` is set."""
    assert config.url is not None
    backend, box = _store_for(config.state_dir or _default_state_dir(), config.state_url)
    return TokenStore(backend, box, name, config.url, identity)


def token_store_status(config: ServerConfig) -> dict[str, object]:
    """Which token store server ``config`` uses, where, and its client identity (no secrets)."""
    backend, _ = _store_for(config.state_dir or _default_state_dir(), config.state_url)
    return {**store_location(backend), "client": config.oauth.client_identity}


def oauth_status(servers: Mapping[str, ServerConfig]) -> dict[str, Any]:
    """For ``hub_status`` and ``mcp-hub check``: the token store in use and each OAuth
    server's client identity; empty without OAuth servers. Opens nothing, holds no secret."""
    oauth = {name: c for name, c in servers.items() if c.auth == "oauth" and c.url}
    if not oauth:
        return {}
    first = next(iter(oauth.values()))
    return {"token_store": describe_location(first.state_dir or _default_state_dir(),
                                             first.state_url),
            "clients": {name: c.oauth.client_identity for name, c in oauth.items()}}


def hub_auth(name: str, config: ServerConfig, on_needs_login: Callable[[str], None]
             ) -> _HubFlow | ExchangeAuth:
    """The ``httpx`` auth a running hub uses for server ``name`` (never interactive)."""
    assert config.url is not None
    settings = config.oauth  # its client_secret is among the manager's secret values
    store = token_store(name, config)
    if settings.grant in EXCHANGE_GRANTS and settings.subject_token_file:
        return ExchangeAuth(name, config.url, store, settings,
                            file_subject(settings.subject_token_file))
    if settings.machine_grant:
        return machine_auth(config.url, store, settings, on_needs_login)
    return HubOAuthProvider(config.url, store, settings, redirect_uri=DEFAULT_REDIRECT,
                            on_needs_login=on_needs_login)


async def wait_for_login(name: str, config: ServerConfig, wake: anyio.Event) -> None:
    """Return once tokens for ``name`` are stored (a login elsewhere), ``wake`` is set, or
    (``jwt_bearer``) the platform has rotated ``assertion_file`` since the wait began: the
    refused grant is then tried once with the new assertion."""
    store = token_store(name, config)
    assertion = config.oauth.assertion_file if config.oauth.grant == "jwt_bearer" else None
    seen = assertion_sent(assertion) if assertion is not None else None
    while not wake.is_set():
        try:
            if await store.has_tokens():
                return
        except StateUnavailable as exc:
            # Connecting again shows the store's error (reconnecting, with backoff).
            logger.warning("upstream %s: %s", name, exc)
            return
        if assertion is not None and file_signature(assertion) != seen:
            logger.info("upstream %s: assertion_file changed; asking for a token again", name)
            return
        with anyio.move_on_after(LOGIN_POLL_SECONDS):
            await wake.wait()


async def watch_logout(store: TokenStore, on_gone: Callable[[], None],
                       interval: float = LOGOUT_POLL_SECONDS) -> None:
    """Call ``on_gone`` and return once tokens seen in ``store`` are deleted (a logout or a
    revocation, in this process or any other sharing the store); runs until cancelled
    otherwise. Tokens never seen (a server that let the session in without one) are no
    logout, nor is a store that does not answer."""
    seen = False
    while True:
        try:
            present = await store.has_tokens()
        except StateUnavailable:
            present = None  # unknown: keep serving, look again
        if present:
            seen = True
        elif present is False and seen:
            on_gone()
            return
        await anyio.sleep(interval)


def login_wanted(tool: str, servers: Mapping[str, ServerConfig],
                 statuses: Iterable[UpstreamStatus]) -> str | None:
    """Why ``tool`` is missing if it belongs to a server waiting in ``needs_login``, else None.

    A server's tools leave the registry while it cannot connect; a call to one then
    says which login is needed instead of only "Unknown tool"."""
    for status in statuses:
        config = servers.get(status.name)
        if str(status.state) != "needs_login" or config is None:
            continue
        prefix = config.effective_prefix(status.name)
        if not prefix or tool.startswith(prefix):
            return f"{tool} is unavailable: {status.last_error}"
    return None
