"""FastMCP's proxy over stdio, configured from an MCPConfig JSON file.

Run with the FastMCP venv's interpreter::

    python fastmcp_proxy.py CONFIG.json            # stdio
    python fastmcp_proxy.py CONFIG.json http PORT  # Streamable HTTP on 127.0.0.1:PORT/mcp

``CONFIG.json`` is ``{"mcpServers": {NAME: {"command", "args", "env", "cwd"}}}``.
This is FastMCP's documented way to front one or many servers:
``fastmcp.server.create_proxy(config)``, served over stdio.
"""

from __future__ import annotations

import json
import sys

from fastmcp.server import create_proxy


def main() -> None:
    with open(sys.argv[1]) as fh:
        config = json.load(fh)
    proxy = create_proxy(config, name="fastmcp-proxy")
    if len(sys.argv) > 3 and sys.argv[2] == "http":
        proxy.run(transport="http", host="127.0.0.1", port=int(sys.argv[3]), show_banner=False,
                  log_level="warning")
    else:
        proxy.run(transport="stdio", show_banner=False)


if __name__ == "__main__":
    main()
