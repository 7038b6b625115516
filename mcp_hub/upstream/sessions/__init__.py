"""Upstream MCP sessions of each protocol era: the lenient 2025 session, the 2026-07-28 one, the
companion session a 2025 client gets toward a server of both eras, and subscriptions/listen."""
