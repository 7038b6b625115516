"""Runner for the official MCP conformance suite, direct and through the hub."""
