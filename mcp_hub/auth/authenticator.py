"""Who is calling: static tokens and OAuth access tokens behind one call.

:meth:`Authenticator.identify` turns an ``Authorization`` header into an
:class:`~mcp_hub.auth.identity.Identity` or an :class:`AuthFailure` carrying the
status, the RFC 6750 error and the ``WWW-Authenticate`` challenge:

* a missing or invalid token: 401 with ``resource_metadata`` pointing at the
  endpoint's RFC 9728 document (when ``[auth]`` is set);
* a token without a required scope: 403 ``insufficient_scope``;
* an identity no ``[[access]]`` rule admits: 403 ``access_denied``;
* the authorization server unreachable: 503;
* a token without the principal claim (``principal_claim``, ``sub`` by default):
  401 — tokens that name nobody are never merged into one shared identity;
* too many unknown opaque tokens from one address: 429 without asking the
  authorization server (:class:`~mcp_hub.auth.introspection.Introspector`).

Static tokens are compared in constant time against every configured token.
A browser is identified by the identity cookie (:mod:`mcp_hub.auth.cookies`),
made by an OpenID Connect sign-in (:mod:`mcp_hub.auth.browser`) or by trading a
static token at ``/?token=T``; it goes through the same ``[[access]]`` rules as
a header, on every request.
JWTs are verified by :class:`~mcp_hub.auth.jwt_verify.JwtVerifier`; the audience
(RFC 8707) must be the configured ``audience`` or, with ``public_url``, the URL of
the endpoint the token is used on — a token for another resource is refused. The
accepted audiences come from the config alone, never from a request header.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from mcp_hub.auth.browser import BrowserSignIn
from mcp_hub.auth.cookies import IDENTITY, SealedCookies, identity_of, identity_record
from mcp_hub.auth.discovery import DiscoveryError, IssuerKeys
from mcp_hub.auth.identity import Identity, MissingPrincipal, identity_from_claims
from mcp_hub.auth.introspection import IntrospectionBudget, Introspector, Throttled
from mcp_hub.auth.jwt_verify import InvalidToken, JwtVerifier, looks_like_jwt
from mcp_hub.auth.metadata import (
    WELL_KNOWN,
    base_url,
    challenge,
    endpoint_of,
    metadata_document,
    resource_path,
)
from mcp_hub.auth.rules import first_match
from mcp_hub.auth.settings import AccessRule, AuthConfig
from mcp_hub.errors import AuthError
from mcp_hub.redact import add_secrets

__all__ = ["COOKIE_NAME", "AuthFailure", "Authenticator"]

#: The identity cookie (sealed; see :mod:`mcp_hub.auth.cookies`).
COOKIE_NAME = "mcp_hub_token"
#: How long the identity cookie made from a static token (``/?token=T``) lasts.
TOKEN_COOKIE_SECONDS = 12 * 3600.0


@dataclass
class AuthFailure(AuthError):
    """Why a request is refused; nothing in it is a credential."""

    status: int
    error: str | None
    description: str
    identity: Identity | None = None
    retry_after: int | None = None


def _audiences(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list):
        return [a for a in aud if isinstance(a, str)]
    return []


def _client_address(scope: Scope) -> str:
    """The client's address (a trusted proxy's ``X-Forwarded-For`` is in the scope already)."""
    client = scope.get("client")
    return str(client[0]) if client else "?"


class Authenticator:
    """Identifies HTTP callers of one hub (see the module docstring)."""

    def __init__(self, *, tokens: Sequence[tuple[str, str]], auth: AuthConfig | None,
                 public_url: str | None, name: str, profiles: Callable[[], frozenset[str]],
                 rules: Callable[[], Sequence[AccessRule]],
                 cookie_key: Callable[[], bytes] | None = None) -> None:
        self._tokens = [(n, t.encode()) for n, t in tokens if t]
        self.auth = auth
        self.public_url = public_url
        self.name = name
        self._profiles = profiles
        self._rules = rules
        self.verifier: JwtVerifier | None = None
        self.introspector: Introspector | None = None
        #: The hub's token key (shared by replicas); a random one when none is given.
        self._cookie_key = cookie_key or (lambda: os.urandom(32))
        self._cookies: SealedCookies | None = None
        self._browser: BrowserSignIn | None = None
        if auth is not None:
            keys = IssuerKeys(auth.issuer, jwks_uri=auth.jwks_uri,
                              refresh_min_seconds=auth.jwks_refresh_min_seconds,
                              unknown_kid_seconds=auth.jwks_unknown_kid_seconds)
            self.verifier = JwtVerifier(keys, algorithms=auth.algorithms, leeway=auth.leeway_seconds)
            if auth.browser is not None and auth.browser.client_secret:
                add_secrets([auth.browser.client_secret])

    @property
    def enabled(self) -> bool:
        return bool(self._tokens) or self.auth is not None

    @property
    def has_static_tokens(self) -> bool:
        return bool(self._tokens)

    # ---------------------------------------------------------------- identify
    def static(self, given: str) -> Identity | None:
        """The identity of a static token, compared against every token in constant time."""
        raw = given.encode()
        found: str | None = None
        for name, token in self._tokens:
            if hmac.compare_digest(raw, token) and found is None:
                found = name
        return Identity.static(found) if found is not None else None

    @property
    def cookies(self) -> SealedCookies:
        """Seals the browser cookies with a key derived from the hub's token key."""
        if self._cookies is None:
            self._cookies = SealedCookies(self._cookie_key())
        return self._cookies

    @property
    def browser(self) -> BrowserSignIn | None:
        """The OpenID Connect sign-in for browsers, when ``[auth.browser]`` is set."""
        auth = self.auth
        if auth is None or auth.browser is None or self.verifier is None:
            return None
        if self._browser is None:
            self._browser = BrowserSignIn(auth, auth.browser, self.verifier, self.cookies)
        return self._browser

    def identity_cookie(self, identity: Identity, via: str) -> tuple[str, int]:
        """The identity cookie's value for ``identity`` and its lifetime in seconds."""
        seconds = TOKEN_COOKIE_SECONDS
        if via == "oidc" and self.auth is not None and self.auth.browser is not None:
            seconds = self.auth.browser.session_seconds
        return self.cookies.seal(identity_record(identity, via), seconds, IDENTITY), int(seconds)

    def from_cookie(self, header: str) -> Identity | None:
        """The identity the browser's identity cookie holds, admitted by the rules.

        None without a valid cookie (missing, altered, expired, a static token no longer
        configured, another issuer); :class:`AuthFailure` 403 when no rule admits it."""
        for part in header.split(";"):
            key, _, value = part.strip().partition("=")
            if key == COOKIE_NAME and value:
                identity = self._cookie_identity(unquote(value))
                if identity is not None:
                    self._admit(identity)
                    return identity
        return None

    def _cookie_identity(self, value: str) -> Identity | None:
        record = self.cookies.open(value, IDENTITY)
        identity = identity_of(record) if record is not None else None
        if identity is None:
            return None
        if identity.kind == "token":
            names = {f"token:{name}" for name, _ in self._tokens}
            return identity if identity.name in names else None
        if self.auth is None or identity.issuer != self.auth.issuer:
            return None
        return identity

    def admit(self, identity: Identity) -> None:
        """:class:`AuthFailure` 403 unless an ``[[access]]`` rule admits ``identity``."""
        self._admit(identity)

    async def identify(self, authorization: str, scope: Scope) -> Identity:
        """The caller behind ``authorization``, admitted by the scopes and rules; or AuthFailure."""
        kind, _, value = authorization.partition(" ")
        token = value.strip()
        if kind.lower() != "bearer" or not token:
            raise AuthFailure(401, None, "a bearer token is required")
        identity = self.static(token)
        if identity is None:
            identity = await self._oauth(token, scope)
        self._admit(identity)
        return identity

    async def _oauth(self, token: str, scope: Scope) -> Identity:
        auth = self.auth
        if auth is None or self.verifier is None:
            raise AuthFailure(401, "invalid_token", "the bearer token is not valid")
        try:
            if looks_like_jwt(token):
                claims = await self.verifier.verify(token)
                kind: Any = "jwt"
            elif auth.introspection:
                claims = await (await self._introspector()).introspect(token, _client_address(scope))
                kind = "introspection"
            else:
                raise InvalidToken("the bearer token is not a JWT")
        except Throttled as exc:
            raise AuthFailure(429, "rate_limited", str(exc), retry_after=exc.retry_after) from None
        except InvalidToken as exc:
            raise AuthFailure(401, "invalid_token", str(exc)) from None
        except DiscoveryError:
            raise AuthFailure(503, "temporarily_unavailable",
                              "the authorization server cannot be reached") from None
        accepted = self.audiences(scope)
        given = [a.rstrip("/") for a in _audiences(claims)]
        if (given or kind == "jwt") and not accepted.intersection(given):
            raise AuthFailure(401, "invalid_token", "the token was issued for another resource")
        try:
            identity = identity_from_claims(claims, kind, auth.groups_claim, auth.principal_claim)
        except MissingPrincipal as exc:
            raise AuthFailure(401, "invalid_token", str(exc)) from None
        missing = [s for s in auth.required_scopes if s not in identity.scopes]
        if missing:
            raise AuthFailure(403, "insufficient_scope", f"required scope: {' '.join(missing)}",
                              identity)
        return identity

    async def _introspector(self) -> Introspector:
        if self.introspector is None:
            auth = self.auth
            assert auth is not None and self.verifier is not None
            endpoint = auth.introspection_endpoint or (
                await self.verifier.keys.metadata()).get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise InvalidToken("the authorization server offers no token introspection")
            self.introspector = Introspector(
                endpoint, issuer=auth.issuer, client_id=auth.introspection_client_id,
                client_secret=auth.introspection_client_secret,
                cache_seconds=auth.introspection_cache_seconds,
                budget=IntrospectionBudget(auth.introspection_burst, auth.introspection_per_minute))
        return self.introspector

    def _admit(self, identity: Identity) -> None:
        rules = self._rules()
        if rules and first_match(rules, identity.attributes) is None:
            raise AuthFailure(403, "access_denied", "no access rule admits this identity", identity)

    def audiences(self, scope: Scope) -> set[str]:
        """The ``aud`` values accepted on this request's endpoint (trailing slash aside).

        Only the config decides: ``audience``, else ``public_url`` + ``/mcp``; with
        ``public_url`` also the URL of the endpoint the request is on. The request's
        ``Host`` and ``X-Forwarded-*`` headers play no part.
        """
        accepted: set[str] = set()
        if self.auth and self.auth.audience:
            accepted.add(self.auth.audience.rstrip("/"))
        if self.public_url:
            base = self.public_url.rstrip("/")
            accepted.add(f"{base}{endpoint_of(scope.get('path', ''))}")
            if not (self.auth and self.auth.audience):
                accepted.add(f"{base}/mcp")
        return accepted

    # ---------------------------------------------------------------- responses
    def metadata_url(self, scope: Scope) -> str | None:
        if self.auth is None:
            return None
        return f"{base_url(scope, self.public_url)}{WELL_KNOWN}{endpoint_of(scope.get('path', ''))}"

    def refusal(self, scope: Scope, failure: AuthFailure) -> Response:
        """The 401/403/503 answer with its ``WWW-Authenticate`` challenge."""
        scopes = self.auth.required_scopes if self.auth else []
        headers = {}
        if failure.status in (401, 403):
            error = failure.error if failure.error != "access_denied" else None
            headers["WWW-Authenticate"] = challenge(
                metadata_url=self.metadata_url(scope), error=error,
                description=failure.description, scopes=scopes)
        if failure.retry_after is not None:
            headers["Retry-After"] = str(failure.retry_after)
        body = {"error": failure.error or "unauthorized", "error_description": failure.description}
        return JSONResponse(body, status_code=failure.status, headers=headers)

    def serves_metadata(self, path: str) -> bool:
        return self.auth is not None and path.startswith(WELL_KNOWN)

    def metadata_response(self, scope: Scope) -> Response:
        """The RFC 9728 document for the endpoint a well-known path names (404 for none)."""
        assert self.auth is not None
        endpoint = resource_path(scope.get("path", ""), self._profiles())
        if endpoint is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        base = base_url(scope, self.public_url)
        resource = f"{base}{endpoint}"
        if endpoint == "/mcp" and self.auth.audience and scope.get("path", "").rstrip("/") == WELL_KNOWN:
            resource = self.auth.audience
        doc = metadata_document(resource, self.auth.issuer, self.auth.required_scopes, self.name)
        return JSONResponse(doc, headers={"Cache-Control": "max-age=300",
                                          "Access-Control-Allow-Origin": "*"})

    async def aclose(self) -> None:
        if self._browser is not None:
            await self._browser.aclose()
        if self.verifier is not None:
            await self.verifier.keys.aclose()
        if self.introspector is not None:
            await self.introspector.aclose()


def sdk_user(identity: Identity) -> AuthenticatedUser:
    """The SDK's user object: its transports bind a session to the identity that opened it."""
    return AuthenticatedUser(AccessToken(
        token="", client_id=identity.client_id or identity.name, scopes=sorted(identity.scopes),
        expires_at=int(identity.expires_at) if identity.expires_at else None,
        subject=identity.subject or identity.name,
        claims={"iss": identity.issuer} if identity.issuer else None))
