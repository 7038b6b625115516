"""The errors of the OAuth client: the server needs a login, or the flow failed."""

from __future__ import annotations

from mcp_hub.errors import HubError

__all__ = ["NeedsLogin", "OAuthError", "login_hint"]


def login_hint(server: str) -> str:
    """What a person runs to fix a ``needs_login`` server."""
    return f"run `mcp-hub login {server}`"


class OAuthError(HubError):
    """The OAuth flow with an upstream's authorization server failed."""


class NeedsLogin(OAuthError):
    """No usable token and no way to get one without a person: ``mcp-hub login`` is needed."""

    def __init__(self, server: str, reason: str = "no stored token") -> None:
        super().__init__(f"{server} needs a login ({reason}): {login_hint(server)}")
        self.server = server
        self.reason = reason
