"""The ``mcp-hub`` command line: thin commands over the Hub, or over a running hub."""
