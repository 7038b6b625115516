"""The two base errors of the hub, standard library only.

:mod:`mcp_hub.errors` holds the whole hierarchy and re-exports these; they live
here so that what must start fast without the MCP SDK (the CLI asking a running
hub, ``mcp-hub add``) can raise and catch them.
"""

from __future__ import annotations

__all__ = ["ConfigError", "HubError"]


class HubError(Exception):
    """Base class of every error the hub raises on its own behalf."""


class ConfigError(HubError):
    """The configuration is invalid; the message says where and how to fix it."""
