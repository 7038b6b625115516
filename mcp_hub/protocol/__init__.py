"""MCP facts every layer shares: log levels, roots, and the extensions (apps, tasks)."""
