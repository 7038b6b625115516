"""Machine grants that authenticate with a key or a workload's JWT instead of a secret.

- ``client_credentials`` with ``client_auth = "private_key_jwt"``: the SDK's
  ``PrivateKeyJWTOAuthProvider`` (RFC 7523 §2.2); the client assertion is signed
  with ``private_key_file`` for the authorization server's issuer (``aud``) and
  lives five minutes. The key file is read for each assertion, so a replaced key
  is used at the next token request. With ``certificate_file`` (the key's X.509
  certificate, as Microsoft Entra ID registers certificate credentials) the
  assertion's header names the certificate by its ``x5t#S256`` and ``x5t``
  thumbprints; the certificate is read with the key.
- ``jwt_bearer`` (RFC 7523 §2.1, workload identity federation): the JWT in
  ``assertion_file`` *is* the grant. Platforms rotate that file (a Kubernetes
  projected service-account token, a cloud's federated token), so it is read
  again before every token request and never cached.

Both run through the hub's flow (:class:`~mcp_hub.upstream.oauth.provider._HubFlow`):
early refresh, the stored expiry, DPoP with ``dpop = true``. A token request the
authorization server refuses (``invalid_grant``, ``invalid_scope``,
``unauthorized_client``, …) is not repeated: the error, with the server's
``error`` code, ends the connection attempt (:class:`GrantRefused`), and the
server waits in ``needs_login`` until the configuration is reloaded, not in a
reconnect loop against the token endpoint. With ``jwt_bearer``, a rotated
``assertion_file`` (its inode, size or modification time changed, looked at once
per login poll, :func:`~mcp_hub.upstream.oauth.attach.wait_for_login`) also ends
the wait: the grant is tried once with the new assertion, and a refusal parks the
server again until the next change. Key and assertion contents are
registered with :mod:`mcp_hub.redact` as they are read.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx2
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.utils import issuers_match
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthClientMetadata

from mcp_hub.config.oauth import OAuthSettings
from mcp_hub.redact import add_secrets
from mcp_hub.upstream.oauth.errors import OAuthError
from mcp_hub.upstream.oauth.provider import HubClientCredentialsProvider, _HubFlow
from mcp_hub.upstream.oauth.tokens import TokenStore

__all__ = ["ASSERTION_SECONDS", "GrantRefused", "HubJwtBearerProvider", "HubPrivateKeyJWTProvider",
           "assertion_sent", "certificate_thumbprints", "file_signature", "machine_auth",
           "read_secret_file", "signing_algorithm"]

#: Lifetime of a client assertion the hub signs (the SDK's default too).
ASSERTION_SECONDS = 300

#: Called with the reason when a refused grant parks the server (the running hub).
OnRefused = Callable[[str], None] | None

_EC_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


class GrantRefused(OAuthError):
    """The authorization server refused the grant; the hub does not ask again by itself."""


#: The signature of each assertion file when it was last read for a token request.
_SENT: dict[str, tuple[int, int, int] | None] = {}


def file_signature(path: str | None) -> tuple[int, int, int] | None:
    """What tells a rewritten file apart (inode, size, modification time in ns); None
    without a path or a file. Platforms rotate by rename, which changes the inode."""
    if path is None:
        return None
    try:
        found = os.stat(os.path.expanduser(path))
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns


def assertion_sent(path: str) -> tuple[int, int, int] | None:
    """The signature of ``path`` when its assertion was last sent (now, if never): a
    rotation after that read, even one before the refusal came back, is a change."""
    return _SENT[path] if path in _SENT else file_signature(path)


def read_secret_file(path: str, what: str) -> str:
    """The stripped contents of ``path`` (a key or an assertion), registered for redaction."""
    try:
        text = Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise OAuthError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    if not text:
        raise OAuthError(f"{what} {path} is empty")
    add_secrets([text, *(line for line in text.splitlines() if len(line) >= 16)])
    return text


def certificate_thumbprints(path: str) -> dict[str, str]:
    """The ``x5t#S256`` and ``x5t`` JWS header parameters (RFC 7515 §4.1.8, §4.1.7) of the
    PEM certificate in ``path``: base64url SHA-256 and SHA-1 of its DER encoding."""
    try:
        cert = x509.load_pem_x509_certificate(Path(path).expanduser().read_bytes())
    except OSError as exc:
        raise OAuthError(f"certificate_file {path} cannot be read: {exc.strerror or exc}"
                         ) from None
    except ValueError:
        raise OAuthError(f"certificate_file {path} is not a PEM certificate") from None
    der = cert.public_bytes(serialization.Encoding.DER)
    return {"x5t#S256": _b64(hashlib.sha256(der).digest()),
            "x5t": _b64(hashlib.sha1(der, usedforsecurity=False).digest())}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def signing_algorithm(pem: str, configured: str | None) -> str:
    """``configured``, or the algorithm the key's type implies."""
    if configured:
        return configured
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise OAuthError(f"private_key_file is not an unencrypted PEM private key ({exc})") from None
    if isinstance(key, ec.EllipticCurvePrivateKey):
        if key.curve.name not in _EC_ALGORITHMS:
            raise OAuthError(f"private_key_file: unsupported curve {key.curve.name}")
        return _EC_ALGORITHMS[key.curve.name]
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    raise OAuthError("private_key_file: use an RSA, EC or Ed25519 key")


async def _refused(flow: _HubFlow, response: httpx2.Response) -> None:
    """Raise :class:`GrantRefused` for an error answer of the token endpoint."""
    if response.status_code == 200:
        return
    await response.aread()
    try:
        body = response.json()
    except ValueError:
        body = {}
    error = body.get("error") if isinstance(body, dict) else None
    detail = body.get("error_description") if isinstance(body, dict) else None
    reason = (f"the authorization server refused the {flow.settings.grant} grant: "
              f"{error or f'HTTP {response.status_code}'}" + (f" ({detail})" if detail else ""))
    if flow.on_needs_login is not None:
        flow.on_needs_login(reason)
    raise GrantRefused(f"{flow.hub_store.server}: {reason}")


class HubPrivateKeyJWTProvider(_HubFlow, PrivateKeyJWTOAuthProvider):
    """``client_credentials`` authenticated with a JWT signed by ``private_key_file``."""

    def __init__(self, server_url: str, store: TokenStore, settings: OAuthSettings,
                 on_needs_login: OnRefused = None) -> None:
        PrivateKeyJWTOAuthProvider.__init__(
            self, server_url, store, settings.client_id or "", self._assertion,
            scope=settings.scope, issuer=settings.issuer)
        self._setup(store, settings, on_needs_login)

    async def _assertion(self, audience: str) -> str:
        """A fresh client assertion for ``audience`` (the authorization server's issuer)."""
        assert self.settings.private_key_file and self.settings.client_id
        pem = read_secret_file(self.settings.private_key_file, "private_key_file")
        algorithm = signing_algorithm(pem, self.settings.signing_algorithm)
        if not self.settings.certificate_file:
            params = SignedJWTParameters(
                issuer=self.settings.client_id, subject=self.settings.client_id, signing_key=pem,
                signing_algorithm=algorithm)
            return await params.create_assertion_provider()(audience)
        now = int(time.time())
        claims = {"iss": self.settings.client_id, "sub": self.settings.client_id,
                  "aud": audience, "iat": now, "exp": now + ASSERTION_SECONDS,
                  "jti": str(uuid.uuid4())}
        headers = certificate_thumbprints(self.settings.certificate_file)
        return jwt.encode(claims, pem, algorithm=algorithm, headers=headers)

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await _refused(self, response)
        await super()._handle_token_response(response)


class HubJwtBearerProvider(_HubFlow):
    """The RFC 7523 JWT-bearer grant with the workload's JWT from ``assertion_file``."""

    def __init__(self, server_url: str, store: TokenStore, settings: OAuthSettings,
                 on_needs_login: OnRefused = None) -> None:
        metadata = OAuthClientMetadata(redirect_uris=None, grant_types=[JWT_BEARER_GRANT_TYPE],
                                       token_endpoint_auth_method="none", scope=settings.scope)
        super().__init__(server_url, metadata, store, None, None)
        self._setup(store, settings, on_needs_login)
        # The SDK wants a client record (else it registers one); the grant itself sends
        # client_id only when one is configured.
        self._fixed_client = OAuthClientInformationFull(
            redirect_uris=None, client_id=settings.client_id or "jwt-bearer",
            grant_types=[JWT_BEARER_GRANT_TYPE], token_endpoint_auth_method="none")

    async def _initialize(self) -> None:
        await super()._initialize()
        self.context.client_info = self._fixed_client  # no registration: the JWT says who

    def _select_authorization_server(self, advertised: list[str]) -> str:
        issuer = self.settings.issuer
        wanted = issuer.rstrip("/") if issuer else None
        return next((s for s in advertised if wanted and s.rstrip("/") == wanted), advertised[0])

    async def _perform_authorization(self) -> httpx2.Request:
        scope = self.settings.scope or self.context.client_metadata.scope
        assert self.settings.assertion_file
        metadata, issuer = self.context.oauth_metadata, self.settings.issuer
        if issuer and (metadata is None or not issuers_match(str(metadata.issuer), issuer)):
            # The workload's JWT goes only to the authorization server named in the config.
            raise OAuthFlowError(f"no authorization server metadata for the configured issuer "
                                 f"{issuer}")
        _SENT[self.settings.assertion_file] = file_signature(self.settings.assertion_file)
        data: dict[str, str] = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": read_secret_file(self.settings.assertion_file, "assertion_file"),
        }
        if self.settings.client_id:
            data["client_id"] = self.settings.client_id
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = self.context.get_resource_url()
        if scope:
            data["scope"] = scope
        return httpx2.Request("POST", self._get_token_endpoint(), data=data,
                              headers={"Content-Type": "application/x-www-form-urlencoded"})

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await _refused(self, response)
        await super()._handle_token_response(response)


def machine_auth(server_url: str, store: TokenStore, settings: OAuthSettings,
                 on_needs_login: OnRefused = None) -> _HubFlow:
    """The provider of a grant that needs no person (``settings.machine_grant``)."""
    if settings.grant == "jwt_bearer":
        return HubJwtBearerProvider(server_url, store, settings, on_needs_login)
    if settings.client_auth == "private_key_jwt":
        return HubPrivateKeyJWTProvider(server_url, store, settings, on_needs_login)
    return HubClientCredentialsProvider(server_url, store, settings)
