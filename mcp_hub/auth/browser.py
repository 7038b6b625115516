"""Browser sign-in at the hub: an OpenID Connect relying party of the ``[auth]`` issuer.

A browser carries no bearer token, yet two of the hub's pages must know who is
looking: the status page, and the connect links of per-user upstreams (a link
must be completed by the person it was issued to). :class:`BrowserSignIn` runs
the authorization code flow with PKCE (S256), ``state`` and ``nonce``:

* :meth:`BrowserSignIn.begin` builds the authorization URL and the sign-in
  cookie (:data:`~mcp_hub.auth.cookies.FLOW`) that holds the flow's secrets, so
  the callback is accepted only in the browser that began it (no login CSRF) and
  on any replica;
* :meth:`BrowserSignIn.finish` checks ``state``, exchanges the code, verifies
  the ID token (the signature against the issuer's published keys, ``iss``,
  ``exp``, ``aud`` = the hub's client id, ``azp``, ``nonce``) and returns the
  :class:`~mcp_hub.auth.identity.Identity` of its claims — built by the same
  function as a bearer token's, so ``sub:``/``group:``/``client:`` rules match a
  person alike on both paths.

The issuer is always ``[auth] issuer``: one issuer, one namespace of ``sub``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import httpx2

from mcp_hub.auth.cookies import FLOW, SealedCookies
from mcp_hub.auth.discovery import DiscoveryError
from mcp_hub.auth.identity import Identity, identity_from_claims
from mcp_hub.auth.jwt_verify import InvalidToken, JwtVerifier
from mcp_hub.auth.settings import AuthConfig, BrowserLogin
from mcp_hub.errors import AuthError

__all__ = ["FLOW_SECONDS", "BrowserSignIn", "SignInError", "safe_next"]

#: How long a person has between leaving for the identity provider and coming back.
FLOW_SECONDS = 600.0
_TIMEOUT = 10.0


class SignInError(AuthError):
    """A sign-in that failed; ``str()`` is safe to show (no code, token or secret in it)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def safe_next(value: str | None) -> str:
    """A path on this hub to return to after signing in (``/`` for anything else)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    if any(ord(c) < 0x21 for c in value):
        return "/"
    return value


def _challenge(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _audiences(claims: Mapping[str, Any]) -> list[str]:
    aud = claims.get("aud")
    if isinstance(aud, str):
        return [aud]
    return [a for a in aud if isinstance(a, str)] if isinstance(aud, list) else []


class BrowserSignIn:
    """The relying party of one hub (see the module docstring)."""

    def __init__(self, auth: AuthConfig, login: BrowserLogin, verifier: JwtVerifier,
                 cookies: SealedCookies, *, client: httpx2.AsyncClient | None = None) -> None:
        self.auth = auth
        self.login = login
        self.verifier = verifier
        self.cookies = cookies
        self._client = client

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=_TIMEOUT, follow_redirects=False)
        return self._client

    async def _endpoint(self, name: str) -> str:
        try:
            value = (await self.verifier.keys.metadata()).get(name)
        except DiscoveryError:
            raise SignInError(503, "the identity provider cannot be reached") from None
        if not isinstance(value, str) or not value.startswith(("https://", "http://")):
            raise SignInError(502, f"the identity provider publishes no {name}")
        return value

    async def begin(self, redirect_uri: str, next_path: str) -> tuple[str, str]:
        """The authorization URL to send the browser to, and the sign-in cookie's value."""
        endpoint = await self._endpoint("authorization_endpoint")
        state, nonce = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        params = {"response_type": "code", "client_id": self.login.client_id,
                  "redirect_uri": redirect_uri, "scope": " ".join(self.login.scopes),
                  "state": state, "nonce": nonce, "code_challenge": _challenge(verifier),
                  "code_challenge_method": "S256"}
        flow = {"st": state, "no": nonce, "v": verifier, "r": redirect_uri,
                "next": safe_next(next_path)}
        separator = "&" if "?" in endpoint else "?"
        return (f"{endpoint}{separator}{urlencode(params)}",
                self.cookies.seal(flow, FLOW_SECONDS, FLOW))

    async def finish(self, query: Mapping[str, str], flow_cookie: str | None
                     ) -> tuple[Identity, str]:
        """The signed-in identity and the path to return to; :class:`SignInError` otherwise."""
        flow = self.cookies.open(flow_cookie or "", FLOW)
        if flow is None:
            raise SignInError(400, "This sign-in was not started in this browser, or it has "
                                   "expired: start again.")
        if not hmac.compare_digest(str(flow["st"]).encode(), query.get("state", "").encode()):
            raise SignInError(400, "This sign-in answer belongs to another sign-in: start again.")
        if "error" in query:
            error = query["error"][:100]
            raise SignInError(403, f"The identity provider did not sign you in ({error}).")
        code = query.get("code")
        if not code:
            raise SignInError(400, "The identity provider sent no authorization code.")
        id_token = await self._exchange(code, str(flow["r"]), str(flow["v"]))
        claims = await self._verified(id_token, str(flow["no"]))
        identity = identity_from_claims(claims, "jwt", self.auth.groups_claim)
        return identity, safe_next(str(flow["next"]))

    async def _exchange(self, code: str, redirect_uri: str, verifier: str) -> str:
        endpoint = await self._endpoint("token_endpoint")
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": verifier}
        headers = {"Accept": "application/json"}
        if self.login.client_secret:
            pair = f"{quote(self.login.client_id, safe='')}:{quote(self.login.client_secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = self.login.client_id
        try:
            response = await self._http().post(endpoint, data=form, headers=headers)
            body = response.json()
        except httpx2.HTTPError:
            raise SignInError(503, "the identity provider cannot be reached") from None
        except ValueError:
            raise SignInError(502, "the identity provider's token answer is not JSON") from None
        if response.status_code != 200 or not isinstance(body, dict):
            error = str(body.get("error", response.status_code) if isinstance(body, dict)
                        else response.status_code)[:100]
            raise SignInError(502, f"the identity provider refused the code ({error})")
        id_token = body.get("id_token")
        if not isinstance(id_token, str):
            raise SignInError(502, "the identity provider returned no ID token")
        return id_token

    async def _verified(self, id_token: str, nonce: str) -> dict[str, Any]:
        try:
            claims = await self.verifier.verify(id_token)
        except InvalidToken as exc:
            raise SignInError(502, f"the ID token is not valid: {exc}") from None
        except DiscoveryError:
            raise SignInError(503, "the identity provider cannot be reached") from None
        audiences = _audiences(claims)
        client_id = self.login.client_id
        if client_id not in audiences:
            raise SignInError(502, "the ID token was issued to another client")
        azp = claims.get("azp")
        if (len(audiences) > 1 or azp is not None) and azp != client_id:
            raise SignInError(502, "the ID token was issued to another client")
        if not hmac.compare_digest(str(claims.get("nonce", "")).encode(), nonce.encode()):
            raise SignInError(502, "the ID token does not answer this sign-in (nonce)")
        if not claims.get("sub"):
            raise SignInError(502, "the ID token names no subject")
        return claims

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
