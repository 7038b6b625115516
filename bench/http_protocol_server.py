"""The HTTP hub served with a chosen uvicorn protocol, for ``bench/http_limits_bench.py``.

    python bench/http_protocol_server.py CONFIG PORT_FILE {limited,httptools,h11}

``limited`` is what ``mcp-hub serve --transport http`` runs (httptools plus the
hub's connection limits); ``httptools`` is uvicorn's protocol without them;
``h11`` is uvicorn's pure-Python protocol with its incomplete-event cap set to
the hub's header limit (h11's only header bound). Everything else is the same
Hub and app.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_hub.config.model import load_config
from mcp_hub.downstream.http.app import build_app
from mcp_hub.downstream.http.limits import ConnectionLimits, limited_protocol
from mcp_hub.downstream.runners import _uvicorn_server
from mcp_hub.hub.core import Hub


async def main(config_path: str, port_file: str, protocol: str) -> None:
    import uvicorn

    config = load_config(config_path)
    http = config.hub.http
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    sock.setblocking(False)
    options: dict[str, Any] = {"http": protocol}
    if protocol == "limited":
        options = {"http": limited_protocol(ConnectionLimits.from_config(http))}
    elif protocol == "h11":
        options["h11_max_incomplete_event_size"] = http.max_header_bytes
    async with Hub(config) as hub:
        app = build_app(hub, host="127.0.0.1", http=http)
        server = _uvicorn_server(uvicorn.Config(app, log_config=None, access_log=False,
                                                lifespan="on", server_header=False, **options))
        Path(port_file).write_text(str(sock.getsockname()[1]))
        await server.serve(sockets=[sock])


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:4])
