"""mcp-hub: one MCP server in front of many.

The hub connects to the upstream MCP servers listed in ``servers.toml``, merges
their tools, prompts and resources with its own builtin and plugin tools in one
registry, and serves the result as a single MCP server over stdio, Streamable
HTTP and SSE.
"""

__version__ = "0.1.0"
