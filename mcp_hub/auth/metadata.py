"""RFC 9728 protected resource metadata and the ``WWW-Authenticate`` challenges.

Every MCP endpoint of the hub is a protected resource with its own URL:
``/mcp``, ``/sse`` and ``/p/NAME/mcp``, ``/p/NAME/sse``. Its metadata is served
at the path-suffixed well-known URL (``/.well-known/oauth-protected-resource/mcp``)
and, for ``/mcp``, at the bare one too. The ``resource`` a document names is
the endpoint URL spelled exactly as the client asked for it — with a trailing
slash if the client used one — because clients compare the two as strings.

These documents are the only place the request's ``Host`` (and, from a trusted
proxy, ``X-Forwarded-Host``/``-Proto``, applied to the scope by
:mod:`mcp_hub.downstream.http.forwarded`) is used, and only without ``public_url``: the
audience a token must carry comes from the config alone.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.types import Scope

__all__ = ["FORWARDED_HOST", "WELL_KNOWN", "base_url", "challenge", "endpoint_of", "metadata_document", "resource_path"]

WELL_KNOWN = "/.well-known/oauth-protected-resource"
#: The scope key under which a trusted proxy's ``X-Forwarded-Host`` is kept.
FORWARDED_HOST = "mcp_hub.forwarded_host"
_ENDPOINT_RE = re.compile(r"^(/p/[^/]+)?/(mcp|sse|messages)/?$")


def base_url(scope: Scope, public_url: str | None) -> str:
    """The hub's URL as clients see it: ``public_url``, else scheme and Host of the request.

    The scheme is the scope's (a trusted proxy's ``X-Forwarded-Proto`` is already in
    it); a ``X-Forwarded-Proto`` header is never read here.
    """
    if public_url:
        return public_url.rstrip("/")
    forwarded = scope.get(FORWARDED_HOST)
    if isinstance(forwarded, str) and forwarded:
        host = forwarded
    else:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host") or "localhost"
    return f"{scope.get('scheme', 'http')}://{host}"


def endpoint_of(path: str) -> str:
    """The MCP endpoint a request path belongs to (``/messages/`` belongs to ``/sse``).

    Paths that are not MCP endpoints (the status page, ``/metrics``) belong to ``/mcp``.
    """
    match = _ENDPOINT_RE.match(path)
    if match is None:
        return "/mcp"
    kind = "sse" if match.group(2) == "messages" else match.group(2)
    return f"{match.group(1) or ''}/{kind}"


def resource_path(well_known_path: str, profiles: frozenset[str]) -> str | None:
    """The endpoint path a metadata URL is about, or None if it is about no endpoint."""
    suffix = well_known_path[len(WELL_KNOWN):]
    if suffix in ("", "/"):
        return "/mcp"
    match = _ENDPOINT_RE.match(suffix)
    if match is None or match.group(2) == "messages":
        return None
    prefix = match.group(1)
    if prefix is not None and prefix[len("/p/"):] not in profiles:
        return None
    return suffix


def metadata_document(resource: str, issuer: str, scopes: list[str], name: str) -> dict[str, Any]:
    """The RFC 9728 document for one endpoint."""
    doc: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": name,
    }
    if scopes:
        doc["scopes_supported"] = scopes
    return doc


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def challenge(*, metadata_url: str | None, error: str | None, description: str | None,
              scopes: list[str]) -> str:
    """A ``WWW-Authenticate: Bearer …`` value (RFC 6750 with RFC 9728's ``resource_metadata``).

    Without ``[auth]`` (static tokens only) the challenge stays ``Bearer realm="mcp-hub"``.
    """
    if not metadata_url:
        return 'Bearer realm="mcp-hub"'
    parts = []
    if error:
        parts.append(f'error="{_quoted(error)}"')
    if description:
        parts.append(f'error_description="{_quoted(description)}"')
    if scopes:
        parts.append(f'scope="{_quoted(" ".join(scopes))}"')
    parts.append(f'resource_metadata="{_quoted(metadata_url)}"')
    return "Bearer " + ", ".join(parts)
