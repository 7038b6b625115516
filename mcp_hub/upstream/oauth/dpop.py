"""RFC 9449 DPoP for an upstream with ``dpop = true``: sender-constrained tokens.

The hub holds one EC P-256 key per upstream, sealed in the token store next to the
tokens (so ``mcp-hub login``, the running hub and every replica sharing ``[state]
url`` prove possession of the same key the tokens are bound to). Each token request
carries a fresh proof (``htm``, ``htu``, ``iat``, ``jti``); each resource request
carries the token with the ``DPoP`` scheme and a fresh proof bound to it (``ath``).

A server that demands a nonce (``use_dpop_nonce``: a 400 from the token endpoint,
a 401 from the MCP server, RFC 9449 §8/§9) gets the request again once, with a new
proof carrying the nonce; the latest nonce of each origin is kept in memory and
used from then on. A second challenge for the same request is answered to the
caller as it is: no loop. A token response that is not ``token_type = DPoP`` is
refused: with ``dpop = true`` the hub never presents an unbound token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from mcp_hub.redact import add_secrets
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.tokens import TokenStore

__all__ = ["DpopKey", "DpopSigner", "is_token_request"]

_NONCE_ERROR = re.compile(r'error\s*=\s*"?use_dpop_nonce"?', re.IGNORECASE)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class DpopKey:
    """One EC P-256 key: its public JWK, its RFC 7638 thumbprint and the proofs it signs."""

    def __init__(self, private_key: ec.EllipticCurvePrivateKey) -> None:
        self._key = private_key
        numbers = private_key.public_key().public_numbers()
        self.jwk = {"crv": "P-256", "kty": "EC", "x": _b64(numbers.x.to_bytes(32, "big")),
                    "y": _b64(numbers.y.to_bytes(32, "big"))}
        canonical = json.dumps(self.jwk, separators=(",", ":"), sort_keys=True)
        #: The ``cnf.jkt`` a token bound to this key carries.
        self.thumbprint = _b64(hashlib.sha256(canonical.encode()).digest())

    @classmethod
    def generate(cls) -> DpopKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem(cls, pem: str) -> DpopKey:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise OAuthError("the stored DPoP key is not an EC key")
        return cls(key)

    def pem(self) -> str:
        return self._key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode()

    def proof(self, method: str, url: str, *, access_token: str | None = None,
              nonce: str | None = None) -> str:
        """A fresh proof for one request (``htu`` without query or fragment)."""
        parts = urlsplit(url)
        claims: dict[str, Any] = {"jti": uuid.uuid4().hex, "htm": method.upper(),
                                  "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
                                  "iat": int(time.time())}
        if access_token is not None:
            claims["ath"] = _b64(hashlib.sha256(access_token.encode("ascii")).digest())
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(claims, self._key, algorithm="ES256",
                          headers={"typ": "dpop+jwt", "jwk": self.jwk})


def is_token_request(request: httpx2.Request) -> bool:
    """A POST of a form with a ``grant_type``: a request to a token endpoint."""
    if request.method != "POST" or not request.headers.get("content-type", "").startswith(
            "application/x-www-form-urlencoded"):
        return False
    return "grant_type" in parse_qs(request.content.decode("ascii", "replace"))


def _origin(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode()}"


class DpopSigner:
    """The DPoP side of one provider: the key (loaded or made once), nonces, proofs."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self._key: DpopKey | None = None
        self._pem: str | None = None
        self._nonces: dict[str, str] = {}

    async def key(self, *, fresh: bool = False) -> DpopKey:
        """The upstream's key: the stored one (read again with ``fresh``), or a new one
        stored now if none is. The new one is stored only if still absent (atomic in the
        state store), then read back: of replicas making one at the same moment, every
        one uses the key that was stored first, from its first proof on."""
        if self._key is None or fresh:
            pem = await self.store.get_dpop_key()
            if pem is None:
                await self.store.add_dpop_key(DpopKey.generate().pem())
                pem = await self.store.get_dpop_key()
                if pem is None:
                    raise OAuthError("the DPoP key could not be stored")
            if self._key is None or pem != self._pem:
                add_secrets([pem])
                self._key, self._pem = DpopKey.from_pem(pem), pem
        return self._key

    async def sign(self, request: httpx2.Request, *, resource: bool) -> None:
        """Put a fresh proof on a token request, or on a resource request sent with a token
        (whose ``Bearer`` scheme becomes ``DPoP``); other requests are left alone."""
        if resource:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() not in ("bearer", "dpop") or not token:
                request.headers.pop("DPoP", None)
                return
            request.headers["Authorization"] = f"DPoP {token}"
        elif not is_token_request(request):
            return
        else:
            token = None
        key = await self.key(fresh=not resource)
        request.headers["DPoP"] = key.proof(request.method, str(request.url), access_token=token,
                                            nonce=self._nonces.get(_origin(request.url)))

    async def challenged(self, request: httpx2.Request, response: httpx2.Response) -> bool:
        """Note the server's nonce; True when ``response`` is a ``use_dpop_nonce`` challenge
        with a nonce other than the one just sent (worth exactly one more try)."""
        nonce = response.headers.get("DPoP-Nonce")
        if not nonce:
            return False
        origin = _origin(request.url)
        sent = self._nonces.get(origin)
        self._nonces[origin] = nonce
        if nonce == sent:
            return False
        if response.status_code == 401:
            return bool(_NONCE_ERROR.search(response.headers.get("WWW-Authenticate", "")))
        if response.status_code == 400:
            await response.aread()
            try:
                return bool(response.json().get("error") == "use_dpop_nonce")
            except (ValueError, AttributeError):
                return False
        return False

    @staticmethod
    async def token_response(response: httpx2.Response) -> httpx2.Response:
        """A successful token response as the SDK reads it (its model knows only ``Bearer``);
        refused unless the token is DPoP-bound."""
        if response.status_code != 200:
            return response
        await response.aread()
        try:
            data = response.json()
        except ValueError:
            return response
        kind = str(data.get("token_type", "")) if isinstance(data, dict) else ""
        if kind.lower() != "dpop":
            raise OAuthError(f"the authorization server issued a {kind or 'untyped'} token, not a "
                             "DPoP-bound one; with dpop = true the hub uses only bound tokens")
        return httpx2.Response(200, json={**data, "token_type": "Bearer"},
                               request=response.request)
