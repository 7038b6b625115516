"""An identity's token exchanged for an upstream token: RFC 8693 and Enterprise-Managed Authorization.

``grant = "token_exchange"``: the subject token (the signed-in caller's own access
token with ``subject = "caller"``, or the one in ``subject_token_file``) goes to
the configured ``token_endpoint`` (or the one the configured ``issuer``'s RFC 8414
metadata names) as an RFC 8693 exchange; the answer is the upstream's token.

``grant = "id_jag"``: the subject token goes to the enterprise IdP
(``idp_token_endpoint``) as an RFC 8693 exchange for an identity-assertion JWT
authorization grant (ID-JAG) whose audience is the upstream's authorization
server (``issuer``) and whose resource is the upstream; the ID-JAG then goes to
that server's token endpoint as an RFC 7523 JWT-bearer grant, with the hub's
client credentials.

Where the subject token goes is configuration, never the upstream's word: a
protected resource's metadata could name any server, and the caller's token or
the ID-JAG would go there. The SDK's ``IdentityAssertionOAuthProvider`` keeps
the same rule for the second leg; it runs inside the transport, where a refusal
ends as a broken session, so :class:`ExchangeAuth` obtains the token before a
call (:meth:`ExchangeAuth.token`) and a refused exchange reaches the caller as
:class:`ExchangeRefused`, naming the upstream and the server's ``error``.

The caller's own token is sent only to that token endpoint, never to the
upstream. Exchanged tokens are kept, sealed, in the upstream's token store under
the identity (:class:`~mcp_hub.upstream.oauth.tokens.TokenStore`; Redis with
``[state] url``, so every replica uses the token one of them obtained) and
reused until shortly before they expire; each one joins the redaction set (opaque
tokens too; the newest 256, :func:`mcp_hub.redact.add_transient`). A refusal is
never retried here and never replaced by another grant or another identity's token.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import anyio
import httpx2
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthMetadata, OAuthToken
from mcp.shared.auth_utils import resource_url_from_server_url

from mcp_hub.config.oauth import OAuthSettings
from mcp_hub.redact import add_transient, redact
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.tokens import TokenStore

__all__ = ["ID_JAG_TYPE", "TOKEN_EXCHANGE_GRANT", "ExchangeAuth", "ExchangeRefused",
           "SubjectSource", "file_subject"]

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
#: Time allowed for one request to a token endpoint or a metadata document.
REQUEST_SECONDS = 30.0
#: Renew this long before expiry at most; a fifth of the lifetime for short-lived tokens.
_MAX_MARGIN = 60.0

#: Where the subject token comes from, asked before each exchange.
SubjectSource = Callable[[], Awaitable[str]]


class ExchangeRefused(OAuthError):
    """A token endpoint refused an exchange (or answered nothing usable)."""

    def __init__(self, server: str, where: str, error: str, description: str | None = None
                 ) -> None:
        detail = f"{error}: {description}" if description else error
        super().__init__(f"{server}: {where} refused the token exchange ({detail}); "
                         "nothing was sent to the upstream")
        self.server = server
        self.error = error


def file_subject(path: str) -> SubjectSource:
    """A subject read from ``path`` before each exchange (platforms rotate such files)."""
    where = anyio.Path(os.path.expanduser(path))

    async def read() -> str:
        try:
            return (await where.read_text()).strip()
        except OSError as exc:
            raise OAuthError(f"subject_token_file {path}: {exc.strerror or exc}") from None

    return read


class ExchangeAuth(httpx2.Auth):
    """The ``httpx`` auth of one (upstream, identity) with an exchanged bearer token."""

    requires_response_body = True

    def __init__(self, server: str, server_url: str, store: TokenStore, settings: OAuthSettings,
                 subject: SubjectSource) -> None:
        self.server = server
        self.resource = resource_url_from_server_url(server_url)
        self.hub_store = store
        self.settings = settings
        self.subject = subject
        self._token: OAuthToken | None = None
        self._expires_at: float | None = None
        self._endpoint: str | None = settings.token_endpoint if settings.grant == \
            "token_exchange" else None
        self._lock = anyio.Lock()
        #: Token requests made by this object (each exchange counts once per leg).
        self.exchanges = 0

    # ------------------------------------------------------------------ the token
    async def token(self) -> str:
        """A bearer token for the upstream: cached, stored (maybe by another replica) or
        freshly exchanged. Raises :class:`ExchangeRefused` when the exchange is refused."""
        async with self._lock:
            if self._usable(self._token, self._expires_at):
                assert self._token is not None
                return self._token.access_token
            stored = await self.hub_store.get_tokens()
            if self._usable(stored, self.hub_store.expires_at):
                assert stored is not None
                self._token, self._expires_at = stored, self.hub_store.expires_at
                add_transient(stored.access_token)  # obtained by another replica
                return stored.access_token
            fresh = await self._obtain()
            add_transient(fresh.access_token)
            await self.hub_store.set_tokens(fresh)
            self._token, self._expires_at = fresh, self.hub_store.expires_at
            return fresh.access_token

    async def forget(self, token: str) -> None:
        """Drop ``token`` (the upstream refused it) so the next call exchanges again."""
        async with self._lock:
            if self._token is not None and self._token.access_token == token:
                self._token = self._expires_at = None
                await self.hub_store.clear_tokens()

    @staticmethod
    def _usable(token: OAuthToken | None, expires_at: float | None) -> bool:
        if token is None:
            return False
        if expires_at is None:
            return True
        margin = min(_MAX_MARGIN, 0.2 * float(token.expires_in or 0))
        return time.time() < expires_at - margin

    async def async_auth_flow(self, request: httpx2.Request
                              ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        token = await self.token()
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code != 401:
            return
        # Revoked or expired early: exchange once more and resend once; no loop.
        await self.forget(token)
        fresh = await self.token()
        if fresh != token:
            request.headers["Authorization"] = f"Bearer {fresh}"
            yield request

    # ------------------------------------------------------------------ the grants
    async def _obtain(self) -> OAuthToken:
        subject = await self.subject()
        if not subject:
            raise OAuthError(f"{self.server}: no subject token to exchange")
        async with httpx2.AsyncClient(timeout=REQUEST_SECONDS) as http:
            if self.settings.grant == "id_jag":
                return await self._id_jag(http, subject)
            return await self._token_exchange(http, subject)

    async def _token_exchange(self, http: httpx2.AsyncClient, subject: str) -> OAuthToken:
        s = self.settings
        data = {"grant_type": TOKEN_EXCHANGE_GRANT, "subject_token": subject,
                "subject_token_type": s.subject_type, "requested_token_type": ACCESS_TOKEN_TYPE}
        if s.resource_param:
            data["resource"] = self.resource
        if s.audience:
            data["audience"] = s.audience
        if s.scope:
            data["scope"] = s.scope
        endpoint = await self._as_token_endpoint(http)
        answer = await self._post(http, endpoint, data, s.client_id or "", s.client_secret,
                                  "the authorization server", [subject])
        return _token(self.server, answer, "the authorization server")

    async def _id_jag(self, http: httpx2.AsyncClient, subject: str) -> OAuthToken:
        s = self.settings
        assert s.issuer is not None and s.idp_token_endpoint is not None
        leg1 = {"grant_type": TOKEN_EXCHANGE_GRANT, "subject_token": subject,
                "subject_token_type": s.subject_type, "requested_token_type": ID_JAG_TYPE,
                "audience": s.issuer, "resource": self.resource}
        if s.scope:
            leg1["scope"] = s.scope
        answer = await self._post(http, s.idp_token_endpoint, leg1, s.idp_client_id or "",
                                  s.idp_client_secret, "the IdP", [subject])
        issued = answer.get("issued_token_type")
        grant = answer.get("access_token")
        if not isinstance(grant, str) or (issued is not None and issued != ID_JAG_TYPE):
            raise ExchangeRefused(self.server, "the IdP", "invalid_response",
                                  f"no ID-JAG in the answer (issued_token_type {issued!r})")
        leg2 = {"grant_type": JWT_BEARER_GRANT_TYPE, "assertion": grant}
        if s.resource_param:
            leg2["resource"] = self.resource
        if s.scope:
            leg2["scope"] = s.scope
        endpoint = await self._as_token_endpoint(http)
        answer = await self._post(http, endpoint, leg2, s.client_id or "", s.client_secret,
                                  "the authorization server", [subject, grant])
        return _token(self.server, answer, "the authorization server")

    async def _as_token_endpoint(self, http: httpx2.AsyncClient) -> str:
        """``token_endpoint``, or the one in the configured issuer's RFC 8414 metadata."""
        if self._endpoint is not None:
            return self._endpoint
        issuer = self.settings.issuer
        assert issuer is not None
        for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
            try:
                response = await http.get(url, headers={"MCP-Protocol-Version": "2025-11-25"})
            except httpx2.HTTPError as exc:
                raise OAuthError(f"{self.server}: metadata of {issuer}: {exc}") from None
            if response.status_code != 200:
                continue
            try:
                metadata = OAuthMetadata.model_validate_json(response.content)
            except ValueError:
                continue
            if str(metadata.issuer).rstrip("/") != issuer.rstrip("/"):
                raise OAuthError(f"{self.server}: the metadata at {url} names issuer "
                                 f"{metadata.issuer}, not the configured {issuer}")
            self._endpoint = str(metadata.token_endpoint)
            return self._endpoint
        raise OAuthError(f"{self.server}: no authorization server metadata found for issuer "
                         f"{issuer}; set token_endpoint")

    async def _post(self, http: httpx2.AsyncClient, endpoint: str, data: dict[str, str],
                    client_id: str, secret: str | None, where: str, hide: list[str]
                    ) -> dict[str, Any]:
        """One token request with client authentication; its JSON answer, or the refusal."""
        self.exchanges += 1
        headers = {"Accept": "application/json"}
        method = self.settings.token_endpoint_auth_method
        if secret and where == "the authorization server" and method == "client_secret_post":
            data = {**data, "client_id": client_id, "client_secret": secret}
        elif secret:  # client_secret_basic: RFC 6749 2.3.1, each part form-encoded first
            pair = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
            headers["Authorization"] = f"Basic {base64.b64encode(pair).decode()}"
        else:
            data = {**data, "client_id": client_id}
        try:
            response = await http.post(endpoint, data=data, headers=headers)
        except httpx2.HTTPError as exc:
            raise OAuthError(f"{self.server}: {where} at {endpoint} did not answer: "
                             f"{redact(str(exc), hide)}") from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            answer = {}
        if response.status_code != 200:
            error = answer.get("error")
            description = answer.get("error_description")
            raise ExchangeRefused(
                self.server, where,
                redact(str(error), hide) if error else f"HTTP {response.status_code}",
                redact(str(description), hide) if description else None)
        return answer


def _token(server: str, answer: dict[str, Any], where: str) -> OAuthToken:
    """The token in a successful answer, sent as a bearer token (an exchange may say
    ``N_A`` for an issued token that is not an access token)."""
    try:
        return OAuthToken.model_validate({**answer, "token_type": "Bearer"})
    except ValueError:
        raise ExchangeRefused(server, where, "invalid_response", "no access_token") from None
