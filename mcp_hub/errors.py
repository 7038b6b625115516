"""The hub's exception hierarchy.

::

    HubError                         anything the hub itself reports
     ├── ConfigError                 servers.toml / settings are wrong; names the key path
     │    └── UnsetVariable          a ${VAR} without a default is unset: parks its server
     │                               only (mcp_hub.config.model)
     ├── IncompatibleLibrary         an installed library lacks a private hook the hub needs
     │                               (mcp_hub.compat)
     ├── UpstreamError               an upstream server failed
     │    ├── ConnectFailure         connecting failed; ``permanent`` says if retrying helps
     │    │                          (mcp_hub.upstream.transports)
     │    └── CallLost               the connection died while a request was in flight
     │                               (mcp_hub.upstream.failures)
     ├── OAuthError                  an upstream's OAuth flow or tokens failed
     │    ├── NeedsLogin             the server waits for ``mcp-hub login NAME``
     │    │                          (mcp_hub.upstream.oauth.errors)
     │    ├── ExchangeRefused        a token endpoint refused a token exchange or ID-JAG
     │    │                          (mcp_hub.upstream.oauth.exchange)
     │    └── GrantRefused           an authorization server refused a key or JWT-bearer grant
     │                               (mcp_hub.upstream.oauth.machine)
     ├── PoolFull                    no room for another per-user upstream session
     │                               (mcp_hub.upstream.peruser.pool)
     ├── AuthError                   a downstream caller's credential or sign-in is refused
     │    ├── AuthFailure            why a request is refused: status, error, description
     │    │                          (mcp_hub.auth.authenticator)
     │    ├── InvalidToken           a token that is not acceptable (mcp_hub.auth.jwt_verify)
     │    │    └── Throttled         the introspection endpoint asked us to wait
     │    │                          (mcp_hub.auth.introspection)
     │    ├── SignInError            a browser sign-in that failed (mcp_hub.auth.browser)
     │    └── MissingPrincipal (+ValueError)  the claims name nobody (mcp_hub.auth.identity)
     ├── DiscoveryError              an authorization server's metadata or keys are unusable
     │                               (mcp_hub.auth.discovery)
     ├── StateUnavailable            the shared state store (Redis) cannot be reached
     │                               (mcp_hub.state.base)
     ├── RoundsFull, RoundCancelled  a 2026-07-28 input round cannot be held / was given up
     │                               (mcp_hub.eras.held)
     ├── EncoderUnavailable          the semantic ranking's encoder cannot be loaded
     │                               (mcp_hub.search.encoder)
     ├── OnnxUnavailable             the ONNX runtime for it is missing or fails
     │                               (mcp_hub.search.onnx_encoder)
     ├── PinError                    the tool pin file cannot be read or written (mcp_hub.pins.pinning)
     ├── JsonEditError (+ValueError) a client config is not JSON(C) of the expected shape
     │                               (mcp_hub.clients.jsonedit)
     └── OutsideRootsError (+ValueError), _Refused
                                     the file tools refuse a path or an argument
                                     (builtin_tools.file_tools)

    MCPError (mcp SDK)               protocol errors: travel to the client as JSON-RPC errors
     ├── UnknownToolError            tools/call named a tool the caller cannot reach (-32602)
     └── NoClientError               no downstream client can answer an upstream's request
                                     (mcp_hub.pipeline.context)

    Exception                        signals that never leave the module that raises them
     ├── Refused                     a tool rewrite refuses a call; caught where the call is
     │                               run and turned into its ``isError`` text
     │                               (mcp_hub.rewrite.tool)
     └── _TooLarge                   a request body passed its limit while it was read; the
                                     reader answers 413 (mcp_hub.downstream.http.body)

Every exception class of the package appears in this tree
(``tests/test_errors_tree.py`` reads the source and checks it). The classes
live next to the code that raises them; this module defines the roots.

Where they are translated:

* upstream side: any transport or SDK exception while connecting becomes a
  ``ConnectFailure`` (``mcp_hub.upstream.failures.classify_connect_failure``); a
  failed call becomes an ``isError`` result or an ``MCPError`` naming the server;
* tool handlers: any exception except ``MCPError`` becomes an ``isError`` result
  with sanitised text (``ToolRegistry.dispatch``), so a tool never breaks a session;
* CLI: a ``HubError`` ends the command with its message, redacted (exit status
  2 for a ``ConfigError``, 1 otherwise).

Programming errors of a plugin (``ValueError``/``PermissionError`` from
``ToolRegistry.register``) are not translated: they fail the plugin's load.
This module imports nothing of the project but :mod:`mcp_hub.hub_errors` (``HubError`` and
``ConfigError``, standard library only) so every other module can import it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_hub.hub_errors import ConfigError, HubError

__all__ = ["ConfigError", "HubError", "IncompatibleLibrary", "UnknownToolError", "UpstreamError",
           "resource_not_found"]


class IncompatibleLibrary(HubError):
    """An installed library (the MCP SDK above all) lacks a private hook a feature in use
    needs, and the feature has no safe fallback; the message names the hook."""


class UpstreamError(HubError):
    """An upstream MCP server could not be reached or answered with a failure."""


class AuthError(HubError):
    """A downstream caller's credential or sign-in is refused; ``str()`` never holds a secret."""


class UnknownToolError(MCPError):
    """A call named a tool that is not exposed: JSON-RPC error -32602.

    The message lists close names so a model can correct its call.
    """

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions: list[str] = list(suggestions)
        message = f"Unknown tool: {name}"
        if self.suggestions:
            message += " " + did_you_mean(self.suggestions)
        super().__init__(INVALID_PARAMS, message)


def did_you_mean(suggestions: Sequence[str]) -> str:
    """The hub's suggestion of close tool names, as its "Unknown tool" error words it."""
    return f"Did you mean: {', '.join(suggestions)}?"


def resource_not_found(uri: str) -> MCPError:
    """The hub's own "no such resource" (-32602), with the URI in ``data.uri``.

    The 2026-07-28 specification (resources, error handling) asks for
    ``{"code": -32602, "data": {"uri": ...}}``; clients of earlier revisions
    read the same error. An upstream's own not-found error is passed on as it
    came, its ``data`` included.
    """
    return MCPError(INVALID_PARAMS, f"Unknown resource: {uri}", data={"uri": uri})
