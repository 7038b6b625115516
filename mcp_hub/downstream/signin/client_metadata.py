"""The hub's own OAuth Client ID Metadata Document, served at ``/client-metadata.json``.

When ``[hub.http] public_url`` is an https URL, the hub uses
``<public_url>/client-metadata.json`` as its ``client_id`` at authorization
servers that advertise ``client_id_metadata_document_supported`` (after a
pre-registered client, before dynamic registration). Such a server fetches the
document from that URL to learn who the client is, so it is public: no token,
no Host check (it is the same for every caller and holds no secret).

The document names the hub as a public client (``token_endpoint_auth_method``
``none``, PKCE) that uses the authorization-code and refresh-token grants, with
the redirect URIs ``mcp-hub login`` listens on: the loopback callback (any port,
RFC 8252 section 7.3) and, for servers with a fixed ``callback_port``, that port.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_hub.config.model import HubConfig
from mcp_hub.config.oauth import CLIENT_METADATA_PATH, hub_client_metadata_url

__all__ = ["CLIENT_METADATA_PATH", "client_metadata_document", "client_metadata_routes"]

#: The loopback redirect URI of ``mcp-hub login``, without its (ephemeral) port.
LOOPBACK_REDIRECT = "http://127.0.0.1/callback"


def client_metadata_document(config: HubConfig,
                             extra_redirect_uris: Iterable[str] = ()) -> dict[str, Any] | None:
    """The document for this config, or None when the hub has no https public URL."""
    public_url = config.hub.http.public_url
    client_id = hub_client_metadata_url(public_url)
    if client_id is None or public_url is None:
        return None
    redirects = [LOOPBACK_REDIRECT]
    for server in config.servers.values():
        port = server.oauth.callback_port if server.auth == "oauth" else 0
        if port:
            redirects.append(f"http://127.0.0.1:{port}/callback")
    if any(server.oauth_per_user for server in config.servers.values()):
        redirects.append(public_url.rstrip("/") + "/connect/callback")  # the per-user flow's
    redirects.extend(extra_redirect_uris)
    return {
        "client_id": client_id,
        "client_name": "mcp-hub",
        "client_uri": public_url.rstrip("/"),
        "redirect_uris": list(dict.fromkeys(redirects)),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }


def client_metadata_routes(config: HubConfig) -> list[Route]:
    """The route serving the document; none without an https public URL."""
    document = client_metadata_document(config)
    if document is None:
        return []

    async def serve(request: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "max-age=300",
                                               "Access-Control-Allow-Origin": "*"})

    return [Route(CLIENT_METADATA_PATH, endpoint=serve, methods=["GET"])]
