"""MCP clients' own configuration files: importing servers from them, installing the hub into them."""
