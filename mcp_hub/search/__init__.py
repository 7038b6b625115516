"""Progressive disclosure: ranking (``ranking``), exposure decision (``exposure``)
and the bridge tools (``bridge``). :mod:`mcp_hub.search.tool_search` re-exports the API."""
