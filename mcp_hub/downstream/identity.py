"""The signed-in identity of an HTTP request, as the :class:`~mcp_hub.hub.access.Caller` of a handler.

The HTTP guard authenticates each request (:mod:`mcp_hub.auth.authenticator`) and
stores the :class:`~mcp_hub.auth.identity.Identity` on the ASGI scope. The SDK
hands every handler the HTTP request its message arrived on (``ctx.request``, on
Streamable HTTP and SSE alike), so :func:`caller_for` reads the identity there
and every check in :mod:`mcp_hub.hub.access` sees who is asking.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp_hub.auth.authenticator import Authenticator
from mcp_hub.auth.identity import Identity
from mcp_hub.config.model import HttpConfig
from mcp_hub.hub.access import Caller
from mcp_hub.hub.interface import ServingHub

__all__ = ["IDENTITY_KEY", "build_authenticator", "caller_for", "scope_caller"]

logger = logging.getLogger(__name__)

IDENTITY_KEY = "mcp_hub.identity"


def caller_for(ctx: Any, base: Caller) -> Caller:
    """``base`` (the endpoint's caller) with the identity of the request behind ``ctx``, if any."""
    request = getattr(ctx, "request", None)
    return scope_caller(getattr(request, "scope", None), base)


def scope_caller(scope: Any, base: Caller) -> Caller:
    """``base`` with the identity the HTTP guard stored on the ASGI ``scope``, if any."""
    identity = scope.get(IDENTITY_KEY) if isinstance(scope, dict) else None
    if not isinstance(identity, Identity):
        return base
    return Caller(profile=base.profile, identity=identity.name, attributes=identity.attributes)


def build_authenticator(hub: ServingHub, http: HttpConfig) -> Authenticator:
    """The authenticator of the HTTP hub; rules and profiles are read from the live config.

    With ``[auth]`` the config names the hub's URL (``public_url`` or ``audience``;
    :class:`~mcp_hub.config.model.HubConfig` refuses a file without either): the Host
    header is the client's to choose, so it never decides which tokens are accepted.
    """
    config = hub.config
    if config.auth and config.auth.browser is None and any(
            s.oauth_per_user for s in config.enabled_servers().values()):
        logger.warning("[auth] without [auth.browser]: a browser cannot sign in, so connect links "
                       "of per-user servers are refused for OAuth identities; set [auth.browser]")
    return Authenticator(
        tokens=http.token_entries(), auth=config.auth, public_url=http.public_url,
        name=config.hub.name, profiles=lambda: frozenset(hub.config.profiles),
        rules=lambda: hub.config.access, cookie_key=hub.secret_key,
    )
