"""Access tokens as JWTs: signature, algorithm, issuer, expiry and not-before.

The checks, in order: the header's ``alg`` is on the allow-list (asymmetric
only: never ``none``, never HS*) and fits the key it names; the signature
verifies against the issuer's key for that ``kid``; ``iss`` is the configured
issuer; ``exp`` is present and not past and ``nbf``/``iat`` not in the future,
each with a small leeway. The audience is checked by the caller of
:meth:`JwtVerifier.verify`, because it depends on the endpoint the token is
used on (RFC 8707). Signature checks are done by PyJWT with ``cryptography``.

A verified token's claims are cached until its ``exp``: a client sends the same
token with every request, and the second request costs a dictionary lookup.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Collection
from typing import Any

import jwt

from mcp_hub.auth.discovery import IssuerKeys
from mcp_hub.compat.libs import jwk_fields
from mcp_hub.errors import AuthError

__all__ = ["InvalidToken", "JwtVerifier", "looks_like_jwt"]

_CACHE_SIZE = 4096


class InvalidToken(AuthError):
    """A token that is not acceptable; the message is safe to show (it never holds the token)."""


def looks_like_jwt(token: str) -> bool:
    """Three dot-separated parts: a JWS in compact form."""
    return token.count(".") == 2


def _key_fits(key: jwt.PyJWK, alg: str) -> bool:
    """The key's type can verify ``alg`` and, if the key names an alg, it is this one."""
    fields = jwk_fields(key)
    declared = fields.get("alg")
    if isinstance(declared, str) and declared != alg:
        return False
    kty = fields.get("kty")
    family = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}.get(alg[:2])
    return family is not None and kty == family


class JwtVerifier:
    """Verifies JWT access tokens of one issuer (see the module docstring)."""

    def __init__(self, keys: IssuerKeys, *, algorithms: Collection[str], leeway: float) -> None:
        self.keys = keys
        self.issuer = keys.issuer
        self.algorithms = frozenset(algorithms)
        self.leeway = leeway
        self._cache: OrderedDict[bytes, dict[str, Any]] = OrderedDict()

    async def verify(self, token: str) -> dict[str, Any]:
        """The claims of a valid token; :class:`InvalidToken` otherwise."""
        digest = hashlib.blake2b(token.encode(), digest_size=20).digest()
        hit = self._cache.get(digest)
        if hit is not None:
            if hit["exp"] + self.leeway > time.time():
                return hit
            del self._cache[digest]
        claims = await self._verify(token)
        self._cache[digest] = claims
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return claims

    async def _verify(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken(f"the token's algorithm {str(alg)[:20]!r} is not accepted")
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise InvalidToken("the token is signed with a key the issuer does not publish")
        if not _key_fits(key, alg):
            raise InvalidToken(f"the token's algorithm {alg!r} does not fit its key")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key=key.key, algorithms=[alg], issuer=self.issuer, leeway=self.leeway,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token was issued by another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"the token is not valid ({type(exc).__name__})") from None
        if not isinstance(claims.get("exp"), (int, float)):
            raise InvalidToken("the token has no numeric exp")
        return claims
