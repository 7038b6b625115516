"""The hub's server side: the MCP server over the merged registry and its transports."""
