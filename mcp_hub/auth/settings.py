"""Config models of ``[auth]``, ``[[access]]``, ``[audit]`` and named static tokens.

Kept apart from :mod:`mcp_hub.config.model` so that everything about signing in reads
in one place; :mod:`mcp_hub.config.model` only hooks these models into the file.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ALLOWED_ALGORITHMS", "AccessRule", "AuditConfig", "AuthConfig", "BrowserLogin",
           "NamedToken"]

#: Asymmetric signature algorithms only: never ``none``, never HS* (a shared secret
#: checked against a public key is the classic algorithm-confusion hole).
ALLOWED_ALGORITHMS = frozenset({
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
})

_MATCH_RE = re.compile(r"^(\*|(sub|scope|group|token|client):.+)$")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class NamedToken(_Model):
    """A static bearer token with a name: the name is its identity (``token:NAME``)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
    token: str


class BrowserLogin(_Model):
    """``[auth.browser]``: people sign in to the hub's own pages with OpenID Connect.

    The hub is a relying party of the ``[auth]`` issuer (authorization code + PKCE):
    the same issuer, so the ``sub`` of a browser sign-in names the same person as the
    ``sub`` of that person's access tokens. Its redirect URI is the hub's
    ``/login/callback`` (``[hub.http] public_url`` or the request's own host).
    """

    #: The hub's client id at the issuer.
    client_id: str = Field(min_length=1)
    #: Its secret (``client_secret_basic``); unset: a public client (PKCE alone).
    client_secret: str | None = None
    #: Scopes asked for; ``openid`` is required.
    scopes: list[str] = Field(default_factory=lambda: ["openid"])
    #: How long a sign-in lasts: the session cookie's lifetime.
    session_seconds: float = Field(default=3600.0, ge=60, le=86400)

    @field_validator("scopes")
    @classmethod
    def _openid(cls, value: list[str]) -> list[str]:
        if "openid" not in value:
            raise ValueError("an OpenID Connect sign-in needs the scope 'openid'")
        return value


class AuthConfig(_Model):
    """``[auth]``: accept access tokens issued by one authorization server."""

    #: The authorization server's issuer URL (exactly as in its tokens' ``iss``).
    issuer: str = Field(pattern=r"^https?://")
    #: The ``aud`` a token must carry; default: ``[hub.http] public_url`` + ``/mcp``.
    #: One of the two must be set: the audience never comes from a request header.
    audience: str | None = None
    #: The claim that names who a token belongs to (its identity); a token without it is refused.
    principal_claim: str = Field(default="sub", min_length=1)
    #: Scopes every token must carry (403 ``insufficient_scope`` otherwise).
    required_scopes: list[str] = Field(default_factory=list)
    #: Signature algorithms accepted (asymmetric only).
    algorithms: list[str] = Field(default_factory=lambda: ["RS256", "ES256", "PS256", "EdDSA"])
    #: Seconds of clock skew tolerated for ``exp``, ``nbf`` and ``iat``.
    leeway_seconds: float = Field(default=30.0, ge=0, le=300)
    #: Where the keys are; default: ``jwks_uri`` from the issuer's metadata (RFC 8414 / OIDC).
    jwks_uri: str | None = Field(default=None, pattern=r"^https?://")
    #: The claim that lists an identity's groups (for ``group:NAME`` rules).
    groups_claim: str = "groups"
    #: Accept opaque (non-JWT) tokens through RFC 7662 introspection.
    introspection: bool = False
    introspection_endpoint: str | None = Field(default=None, pattern=r"^https?://")
    introspection_client_id: str | None = None
    introspection_client_secret: str | None = None
    #: How long an introspection answer is reused (never past the token's ``exp``).
    introspection_cache_seconds: float = Field(default=30.0, ge=0, le=600)
    #: Seconds between two key-set fetches caused by an unknown ``kid``.
    jwks_refresh_min_seconds: float = Field(default=1.0, ge=0, le=3600)
    #: Browser sign-in to the status page and connect links (see :class:`BrowserLogin`).
    browser: BrowserLogin | None = None
    #: How long a ``kid`` not in a fresh key set is remembered: it causes no fetch meanwhile.
    jwks_unknown_kid_seconds: float = Field(default=60.0, ge=0, le=3600)
    #: Introspections of tokens not in a cache, per client address: the bucket's size ...
    introspection_burst: int = Field(default=10, ge=1)
    #: ... and how many it regains a minute; beyond, 429 without asking the server.
    introspection_per_minute: int = Field(default=60, ge=1)

    @field_validator("algorithms")
    @classmethod
    def _asymmetric_only(cls, value: list[str]) -> list[str]:
        bad = [a for a in value if a not in ALLOWED_ALGORITHMS]
        if bad:
            raise ValueError(f"{', '.join(bad)}: only asymmetric algorithms are accepted "
                             f"({', '.join(sorted(ALLOWED_ALGORITHMS))})")
        if not value:
            raise ValueError("name at least one algorithm")
        return value


class AccessRule(_Model):
    """``[[access]]``: identities matching ``match`` reach profile ``profile``.

    ``match``: ``sub:ID``, ``scope:NAME``, ``group:NAME``, ``token:NAME``,
    ``client:CLIENT_ID`` or ``*``. ``profile`` names a ``[profiles.NAME]``; left out,
    the identity reaches everything. The first matching rule decides. ``admin``
    opens the full operations views (``/status.json``, the status page, ``/metrics``):
    every server, every identity's counters; without it an identity sees only what
    its profile reaches and its own counters (:class:`mcp_hub.hub.access.OpsView`).
    """

    match: str
    profile: str | None = None
    #: The full operations views, whatever ``profile`` reaches over MCP.
    admin: bool = False

    @field_validator("match")
    @classmethod
    def _known_kind(cls, value: str) -> str:
        if not _MATCH_RE.match(value):
            raise ValueError(f"{value!r}: write sub:ID, scope:NAME, group:NAME, token:NAME, "
                             "client:ID or *")
        return value


class AuditConfig(_Model):
    """``[audit]``: one JSON line per call (and per denial)."""

    #: A file to append to, or ``-`` for the log stream (stderr); unset: no audit.
    path: str | None = None
    #: Record the call's arguments (redacted); off by default.
    include_arguments: bool = False
    #: Where the audit line's arguments may not go: keys whose values are always hidden.
    redact_keys: list[str] = Field(default_factory=lambda: [
        "password", "secret", "token", "api_key", "apikey", "authorization", "key"])
    format: Literal["jsonl"] = "jsonl"
