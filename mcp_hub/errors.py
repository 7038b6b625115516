"""The hub's exception hierarchy.

::

    HubError                 anything the hub itself reports
     ├── ConfigError         servers.toml / settings are wrong; the message names the key path
     └── UpstreamError       an upstream server failed (connect, initialize, call)

    MCPError (mcp SDK)
     └── UnknownToolError    tools/call named a tool the hub does not expose (-32602)

Foreign exceptions are translated at the boundary into the most specific class
here (``raise UpstreamError(msg) from exc``). This module imports nothing of the
project so every other module can import it.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

__all__ = ["ConfigError", "HubError", "UnknownToolError", "UpstreamError"]


class HubError(Exception):
    """Base class of every error the hub raises on its own behalf."""


class ConfigError(HubError):
    """The configuration is invalid; the message says where and how to fix it."""


class UpstreamError(HubError):
    """An upstream MCP server could not be reached or answered with a failure."""


class UnknownToolError(MCPError):
    """A call named a tool that is not exposed: JSON-RPC error -32602.

    The message lists close names so a model can correct its call.
    """

    def __init__(self, name: str, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions: list[str] = list(suggestions)
        message = f"Unknown tool: {name}"
        if self.suggestions:
            message += f" Did you mean: {', '.join(self.suggestions)}?"
        super().__init__(INVALID_PARAMS, message)
