"""An MCP Apps server built on the Python SDK's ``mcp.server.apps.Apps``.

``python -m tests.fixtures_upstream.apps_server --label L [--port N]``: stdio, or
Streamable HTTP on ``127.0.0.1:N`` with ``--port``. Every instance serves the
same app address, ``ui://app.html`` (HTML naming its label), so two of them
collide unless namespaced, and:

* ``show_dashboard()`` — the UI tool (``_meta.ui.resourceUri = ui://app.html``,
  visible to model and app): ``ui:L`` to a client that negotiated MCP Apps,
  ``text:L`` (the text fallback) to any other;
* ``refresh_data()`` — app-only (``visibility: ["app"]``): ``refresh:L``; the
  app's HTML calls it by this name;
* ``plain_L()`` — a tool with no UI, named after the label.
"""

from __future__ import annotations

import argparse

from mcp.server.apps import Apps, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer

APP_URI = "ui://app.html"


def build(label: str) -> MCPServer:
    """The server of one label."""
    apps = Apps()

    @apps.tool(resource_uri=APP_URI, visibility=["model", "app"],
               description="Show the live dashboard")
    def show_dashboard(ctx: Context) -> str:
        return f"ui:{label}" if client_supports_apps(ctx) else f"text:{label}"

    @apps.tool(resource_uri=APP_URI, visibility=["app"],
               description="Refresh the dashboard data (called by the app)")
    def refresh_data() -> str:
        return f"refresh:{label}"

    html = (f"<!doctype html><title>{label}</title><script>"
            "callServerTool({name: 'refresh_data', arguments: {}})</script>")
    apps.add_html_resource(APP_URI, html, name="dashboard")
    server = MCPServer(f"apps-{label}", extensions=[apps])

    def plain() -> str:
        return f"plain:{label}"

    server.add_tool(plain, name=f"plain_{label}", description=f"Plain tool of {label}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", default="one")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    server = build(args.label)
    if args.port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
