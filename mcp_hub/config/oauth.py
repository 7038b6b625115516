"""``[servers.NAME.oauth]``: how the hub authenticates to an OAuth-protected upstream.

Only read when the server sets ``auth = "oauth"``. The client identity is chosen in
this order: a pre-registered ``client_id`` (with ``client_secret`` for a
confidential client), a Client ID Metadata Document (``client_metadata_url``,
used when the authorization server advertises support; by default the document
the hub serves itself at ``<[hub.http] public_url>/client-metadata.json`` when
that public URL is https), dynamic client registration (RFC 7591) otherwise.

Machine grants need no person: ``client_credentials`` (with a client secret or,
``client_auth = "private_key_jwt"``, a signed JWT made with ``private_key_file``,
RFC 7523 §2.2) and ``jwt_bearer`` (the workload's own JWT from ``assertion_file``,
RFC 7523 §2.1, re-read before each token request). ``dpop = true`` binds every
token to a key the hub keeps per upstream (RFC 9449). Every file these settings
name (key, ``certificate_file``, assertion, subject token) is checked when the
config loads, so ``mcp-hub check`` and start-up name an unusable one (the path and
the problem, never the contents) instead of a connect error later.
This module imports nothing of the project so :mod:`mcp_hub.config.model` can import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificatePublicKeyTypes,
    PublicKeyTypes,
)
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

__all__ = ["CLIENT_METADATA_PATH", "EXCHANGE_GRANTS", "OAuthSettings", "hub_client_metadata_url"]

#: The grants that exchange an identity's token for an upstream token (no login, no browser).
EXCHANGE_GRANTS = frozenset({"token_exchange", "id_jag"})
#: Where the hub's HTTP server serves its own Client ID Metadata Document.
CLIENT_METADATA_PATH = "/client-metadata.json"


def hub_client_metadata_url(public_url: str | None) -> str | None:
    """The URL of the document the hub serves, usable as a client_id; None without an
    https public URL (a client_id URL must be https with a path)."""
    if not public_url or not public_url.lower().startswith("https://"):
        return None
    return public_url.rstrip("/") + CLIENT_METADATA_PATH


class OAuthSettings(BaseModel):
    """OAuth client settings of one upstream server."""

    model_config = ConfigDict(extra="forbid")

    #: ``authorization_code`` (a person logs in once with ``mcp-hub login``),
    #: ``client_credentials`` (machine to machine; client_id and client_secret or a key),
    #: ``jwt_bearer`` (workload identity federation: the JWT in ``assertion_file``),
    #: ``token_exchange`` (RFC 8693) or ``id_jag`` (Enterprise-Managed Authorization).
    grant: Literal["authorization_code", "client_credentials", "jwt_bearer", "token_exchange",
                   "id_jag"] = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = None
    #: How a pre-registered client authenticates at the token endpoint.
    token_endpoint_auth_method: Literal[
        "client_secret_basic", "client_secret_post", "none"] | None = None
    #: An https URL where the hub's Client ID Metadata Document is served.
    client_metadata_url: str | None = None
    #: Scopes to request; empty = the ones the server's 401 or metadata names.
    scopes: list[str] = Field(default_factory=list)
    #: Send the RFC 8707 ``resource`` parameter (some servers, GitHub's, reject it).
    resource_param: bool = True
    #: The authorization server's issuer, for ``client_credentials`` (binds the secret to it).
    issuer: str | None = None
    #: Loopback port ``mcp-hub login`` listens on for the redirect; 0 = any free port.
    callback_port: int = Field(default=0, ge=0, le=65535)
    #: Client name shown on the authorization server's consent page.
    client_name: str = "mcp-hub"
    # -- token_exchange / id_jag: an identity exchanged for an upstream token ------------
    #: ``"caller"``: the signed-in caller's own access token (``[auth]``) is the subject,
    #: exchanged per identity; otherwise the token in ``subject_token_file`` (one for the hub).
    subject: Literal["caller"] | None = None
    #: A file holding the subject token (e.g. an ID token), re-read before each exchange.
    subject_token_file: str | None = None
    #: The subject token's RFC 8693 type; default ``access_token`` for ``subject = "caller"``
    #: with ``token_exchange``, ``id_token`` otherwise.
    subject_token_type: Literal["access_token", "id_token", "jwt"] | None = None
    #: ``token_exchange``: where to exchange (else the ``issuer``'s RFC 8414 metadata says).
    token_endpoint: str | None = None
    #: ``token_exchange``: the RFC 8693 ``audience`` to ask for (the upstream's, if it needs one).
    audience: str | None = None
    #: ``id_jag``: the enterprise IdP's token endpoint and this client's identity there.
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    # -- keys instead of secrets, workload identity, sender-constrained tokens --
    #: ``private_key_jwt``: authenticate ``client_credentials`` with a JWT signed by
    #: ``private_key_file`` (RFC 7523 §2.2); unset: the client secret.
    client_auth: Literal["client_secret_basic", "client_secret_post", "private_key_jwt"] | None = None
    #: PEM private key (RSA, EC or Ed25519) that signs the client assertion.
    private_key_file: str | None = None
    #: PEM X.509 certificate of ``private_key_file``'s key (Microsoft Entra ID's certificate
    #: credentials): the client assertion's header then carries its ``x5t#S256`` and ``x5t``.
    certificate_file: str | None = None
    #: JWS algorithm of the client assertion; unset: from the key (RS256, ES256/384/512, EdDSA).
    signing_algorithm: Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
                               "ES256", "ES384", "ES512", "EdDSA"] | None = None
    #: ``jwt_bearer``: the file holding the workload's JWT, read again before each token request.
    assertion_file: str | None = None
    #: RFC 9449: bind tokens to a per-upstream key and prove possession on every request.
    dpop: bool = False
    # True when client_metadata_url is the hub's own document (set by the loader).
    _hub_served: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _grant_needs_secret(self) -> OAuthSettings:
        if (self.grant == "client_credentials" and self.client_auth != "private_key_jwt"
                and not (self.client_id and self.client_secret)):
            raise ValueError("grant 'client_credentials' needs client_id and client_secret")
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret needs client_id")
        return self

    @model_validator(mode="after")
    def _exchange_needs(self) -> OAuthSettings:
        missing = self.exchange_missing()
        if missing:
            raise ValueError(f"grant {self.grant!r} needs {missing}")
        if self.grant not in EXCHANGE_GRANTS and (self.subject or self.subject_token_file):
            raise ValueError("subject and subject_token_file belong to grant 'token_exchange' "
                             "or 'id_jag'")
        return self

    def exchange_missing(self) -> str | None:
        """What a ``token_exchange`` or ``id_jag`` grant lacks, in words (None: complete)."""
        if self.grant not in EXCHANGE_GRANTS:
            return None
        if (self.subject == "caller") == bool(self.subject_token_file):
            return 'either subject = "caller" or subject_token_file (one of them)'
        if not self.client_id:
            return "client_id (the hub's client at the upstream's authorization server)"
        if self.grant == "token_exchange" and not (self.token_endpoint or self.issuer):
            return "token_endpoint, or issuer to find it in the authorization server's metadata"
        if self.grant == "id_jag":
            if not self.client_secret:
                return "client_secret (the jwt-bearer grant needs a confidential client)"
            if not self.issuer:
                return ("issuer (the upstream's authorization server: the ID-JAG's audience; "
                        "never taken from the upstream's own metadata)")
            if not (self.idp_token_endpoint and self.idp_client_id):
                return "idp_token_endpoint and idp_client_id (the enterprise IdP)"
        return None

    @property
    def per_caller(self) -> bool:
        """True for a grant run per signed-in caller (``subject = "caller"``)."""
        return self.grant in EXCHANGE_GRANTS and self.subject == "caller"

    @property
    def subject_type(self) -> str:
        """The RFC 8693 URI of the subject token's type."""
        short = self.subject_token_type or (
            "access_token" if self.per_caller and self.grant == "token_exchange" else "id_token")
        return f"urn:ietf:params:oauth:token-type:{short}"

    @model_validator(mode="after")
    def _key_grants_complete(self) -> OAuthSettings:
        """``private_key_jwt`` and ``jwt_bearer``: each named file is there, nothing is
        missing, and no key is set that the chosen grant would ignore."""
        problems = _key_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def machine_grant(self) -> bool:
        """True for the grants that run without a person (no ``mcp-hub login`` needed)."""
        return self.grant in ("client_credentials", "jwt_bearer")

    def use_hub_client_metadata(self, public_url: str | None) -> None:
        """Default ``client_metadata_url`` to the hub's own document (a pre-registered
        client and an explicit URL come first)."""
        url = hub_client_metadata_url(public_url)
        if url and not self.client_id and not self.client_metadata_url:
            self.client_metadata_url = url
            self._hub_served = True

    @property
    def client_identity(self) -> str:
        """How the client identifies itself: ``pre-registered``, ``cimd`` (falling back to
        dynamic registration where the server lacks support) or ``dynamic``; a key grant
        says which (``private_key_jwt``, ``jwt_bearer``), ``+ dpop`` when tokens are bound."""
        return self._identity_kind + (" + dpop" if self.dpop else "")

    @property
    def _identity_kind(self) -> str:
        kind = _key_identity(self)
        if kind:
            return kind
        if self.client_id:
            return "pre-registered"
        if self.client_metadata_url:
            return "cimd (hub-served)" if self._hub_served else "cimd"
        return "dynamic"

    @property
    def scope(self) -> str | None:
        """The configured scopes as one space-separated string, or None."""
        return " ".join(self.scopes) or None


def _key_identity(s: OAuthSettings) -> str | None:
    """How a key grant identifies itself, for status; None for the other clients."""
    if s.grant == "jwt_bearer":
        return "workload jwt_bearer"
    if s.client_auth == "private_key_jwt":
        return "pre-registered private_key_jwt"
    return None


def _key_problems(s: OAuthSettings) -> list[str]:
    """What is missing or contradictory among the key, assertion and DPoP settings."""
    problems: list[str] = []
    if s.client_auth == "private_key_jwt":
        if s.grant != "client_credentials":
            problems.append("client_auth 'private_key_jwt' needs grant 'client_credentials'")
        if not s.client_id:
            problems.append("client_auth 'private_key_jwt' needs client_id")
        if not s.private_key_file:
            problems.append("client_auth 'private_key_jwt' needs private_key_file")
        if s.client_secret:
            problems.append("client_auth 'private_key_jwt' authenticates with a key: "
                            "remove client_secret")
    elif s.private_key_file or s.signing_algorithm or s.certificate_file:
        key = next(k for k in ("private_key_file", "signing_algorithm", "certificate_file")
                   if getattr(s, k))
        if s.grant == "jwt_bearer":
            problems.append(f"grant 'jwt_bearer' sends the workload's JWT as it is (the hub "
                            f"signs nothing): remove {key}")
        else:
            problems.append(f"{key} needs client_auth 'private_key_jwt'")
    if s.grant == "jwt_bearer":
        if not s.assertion_file:
            problems.append("grant 'jwt_bearer' needs assertion_file (the workload's JWT)")
        if s.client_auth:
            problems.append("grant 'jwt_bearer' authenticates with the assertion: remove "
                            "client_auth")
    elif s.assertion_file:
        problems.append("assertion_file needs grant 'jwt_bearer'")
    return problems + _file_problems(s)


def _file_problems(s: OAuthSettings) -> list[str]:
    """Each named file is there and readable; the key is a private key the configured
    algorithm can sign with; the certificate is the key's. Never quotes a file."""
    problems: list[str] = []
    texts: dict[str, bytes] = {}
    for key in ("private_key_file", "certificate_file", "assertion_file", "subject_token_file"):
        path = getattr(s, key)
        if not path:
            continue
        found = Path(path).expanduser()
        if not found.is_file():
            problems.append(f"{key}: no such file {path}")
            continue
        try:
            texts[key] = found.read_bytes()
        except OSError as exc:
            problems.append(f"{key}: {path} cannot be read ({exc.strerror or type(exc).__name__})")
            continue
        if not texts[key].strip():
            problems.append(f"{key}: {path} is empty")
    if "private_key_file" in texts and texts["private_key_file"].strip():
        problems += _key_file_problems(s, texts["private_key_file"], texts.get("certificate_file"))
    return problems


def _key_file_problems(s: OAuthSettings, pem: bytes, cert_pem: bytes | None) -> list[str]:
    """The key parses as an unencrypted PEM private key that ``signing_algorithm`` fits, and
    ``certificate_file`` (if any) certifies its public key."""
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        return [f"private_key_file: {s.private_key_file} is not an unencrypted PEM private key"]
    kind, algorithms = _key_algorithms(key)
    problems: list[str] = []
    if not algorithms:
        problems.append(f"private_key_file: {kind} key cannot sign a client assertion; use "
                        "an RSA, EC (P-256, P-384, P-521) or Ed25519 key")
    elif s.signing_algorithm and s.signing_algorithm not in algorithms:
        problems.append(f"private_key_file: {kind} key cannot sign signing_algorithm "
                        f"{s.signing_algorithm!r} (it signs {', '.join(algorithms)})")
    if cert_pem is not None and cert_pem.strip():
        try:
            cert = x509.load_pem_x509_certificate(cert_pem)
        except ValueError:
            return [*problems, f"certificate_file: {s.certificate_file} is not a PEM certificate"]
        if _public_der(cert.public_key()) != _public_der(key.public_key()):
            problems.append(f"certificate_file: {s.certificate_file} does not certify the key in "
                            f"private_key_file {s.private_key_file}")
    return problems


def _key_algorithms(key: object) -> tuple[str, tuple[str, ...]]:
    """A key's kind in words (with its article) and the JWS algorithms it can sign."""
    if isinstance(key, rsa.RSAPrivateKey):
        return "an RSA", ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
    if isinstance(key, ec.EllipticCurvePrivateKey):
        curves = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
        found = curves.get(key.curve.name)
        return f"an EC {key.curve.name}", (found,) if found else ()
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "an Ed25519", ("EdDSA",)
    return f"a {type(key).__name__}", ()


def _public_der(key: PublicKeyTypes | CertificatePublicKeyTypes) -> bytes:
    """A public key's SubjectPublicKeyInfo DER, to compare two keys."""
    return key.public_bytes(serialization.Encoding.DER,
                            serialization.PublicFormat.SubjectPublicKeyInfo)
