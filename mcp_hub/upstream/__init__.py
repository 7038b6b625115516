"""The hub's client side: one supervised connection per upstream MCP server.

``UpstreamManager`` connects to every enabled server of ``servers.toml``
(stdio, Streamable HTTP, SSE), registers their tools in the tool registry under
``mcp-<server>``, merges their prompts and resources, keeps all of it current on
``list_changed``, and forwards calls over one long-lived session per server.
"""

from mcp_hub.upstream.connection import ServerConnection
from mcp_hub.upstream.manager import UpstreamManager
from mcp_hub.upstream.status import ServerState, UpstreamStatus, format_status_table
from mcp_hub.upstream.transports import ConnectFailure, child_environment

__all__ = [
    "ConnectFailure",
    "ServerConnection",
    "ServerState",
    "UpstreamManager",
    "UpstreamStatus",
    "child_environment",
    "format_status_table",
]
