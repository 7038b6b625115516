"""Progressive disclosure: ranking (``ranking``), exposure decision (``exposure``)
and the bridge tools (``bridge``). :mod:`mcp_hub.tool_search` re-exports the API."""
