"""Evaluation of tool_search ranking on real MCP servers' tool definitions."""
