"""The caller's own access token, as the subject of a per-caller exchange (``subject = "caller"``).

A server with ``grant = "token_exchange"`` or ``"id_jag"`` and ``subject = "caller"``
runs on the per-user session pool: each identity gets its own session, whose
upstream token is exchanged from that identity's own token. The token is the
bearer the HTTP guard validated for this very request (the ``Authorization``
header; the guard refuses a request with two of them), noted per
(server, identity) before each call so the exchange always uses the newest one.
It is kept in memory only, and only for the identity it belongs to: a call by
one identity never exchanges another's token.

A static token (``token:NAME``) or a call without a bearer token has nothing to
exchange: the call is refused with a message saying so, and no other grant is tried.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.exchange import ExchangeAuth, SubjectSource

__all__ = ["CallerTokens", "exchange_refusal"]


def bearer_of(headers: Mapping[str, str] | None) -> str | None:
    """The bearer token of the request's ``Authorization`` header, if any."""
    if not headers:
        return None
    value = headers.get("authorization") or headers.get("Authorization") or ""
    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class CallerTokens:
    """The newest token of each (server, identity), and the live exchangers using them."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, str], str] = {}
        self.exchangers: dict[tuple[str, str], ExchangeAuth] = {}

    def note(self, server: str, identity: str, call: CallContext) -> str | None:
        """Keep the caller's token for ``server``; the refusal to answer when there is none."""
        token = bearer_of(call.headers)
        if identity.startswith("token:") or token is None:
            return (f"{server} acts as the signed-in caller: it exchanges the caller's own "
                    "OAuth access token ([auth]), and this call carries none (a static token or "
                    "no bearer token); nothing was sent")
        self._tokens[(server, identity)] = token
        return None

    def source(self, server: str, identity: str) -> SubjectSource:
        """The subject of ``identity``'s exchanges: its newest noted token."""

        async def subject() -> str:
            token = self._tokens.get((server, identity))
            if token is None:
                raise OAuthError(f"{server}: no access token of {identity} to exchange")
            return token

        return subject

    def forget(self, server: str) -> None:
        """Drop every token and exchanger of ``server`` (it left the config or changed)."""
        for key in [k for k in self._tokens if k[0] == server]:
            del self._tokens[key]
        for key in [k for k in self.exchangers if k[0] == server]:
            del self.exchangers[key]


def exchange_refusal(exc: BaseException) -> str | None:
    """The message of an OAuth failure inside ``exc`` (maybe in an exception group), or None."""
    if isinstance(exc, OAuthError):
        return str(exc)
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = exchange_refusal(inner)
            if found is not None:
                return found
    cause = exc.__cause__ or exc.__context__
    return exchange_refusal(cause) if cause is not None and cause is not exc else None
