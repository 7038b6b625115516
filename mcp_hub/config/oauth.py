"""``[servers.NAME.oauth]``: how the hub authenticates to an OAuth-protected upstream.

Only read when the server sets ``auth = "oauth"``. The client identity is chosen in
this order: a pre-registered ``client_id`` (with ``client_secret`` for a
confidential client), a Client ID Metadata Document (``client_metadata_url``,
used when the authorization server advertises support; by default the document
the hub serves itself at ``<[hub.http] public_url>/client-metadata.json`` when
that public URL is https), dynamic client registration (RFC 7591) otherwise.
This module imports nothing of the project so :mod:`mcp_hub.config.model` can import it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

__all__ = ["CLIENT_METADATA_PATH", "OAuthSettings", "hub_client_metadata_url"]

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

    #: ``authorization_code`` (a person logs in once with ``mcp-hub login``) or
    #: ``client_credentials`` (machine to machine; needs client_id and client_secret).
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
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
    # True when client_metadata_url is the hub's own document (set by the loader).
    _hub_served: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _grant_needs_secret(self) -> OAuthSettings:
        if self.grant == "client_credentials" and not (self.client_id and self.client_secret):
            raise ValueError("grant 'client_credentials' needs client_id and client_secret")
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret needs client_id")
        return self

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
        dynamic registration where the server lacks support) or ``dynamic``."""
        if self.client_id:
            return "pre-registered"
        if self.client_metadata_url:
            return "cimd (hub-served)" if self._hub_served else "cimd"
        return "dynamic"

    @property
    def scope(self) -> str | None:
        """The configured scopes as one space-separated string, or None."""
        return " ".join(self.scopes) or None
