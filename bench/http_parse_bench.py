"""The HTTP protocol's own cost per request, without network or client: the limits vs none.

One command, from the repository root::

    .venv/bin/python bench/http_parse_bench.py

Each protocol object (uvicorn's ``httptools``, the hub's ``limited`` subclass,
uvicorn's ``h11``) gets a connection on an in-memory transport and one
keep-alive request of an MCP client's shape (a POST with eleven headers and a
small JSON body); a trivial ASGI app answers 200. Measured side by side in
alternating rounds, so machine load favours none: microseconds per request and
the ratio to ``httptools``. This is the share of a request the header limits
can change; ``bench/http_limits_bench.py`` measures whole calls.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from bench.common import markdown_table
from mcp_hub.downstream.http.limits import ConnectionLimits, limited_protocol

BODY = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo_echo","arguments":{"text":"hi"}}}'
REQUEST = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAccept: application/json, text/event-stream\r\n"
    b"Content-Type: application/json\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef\r\n"
    b"Mcp-Session-Id: 5d7f3b2a9c1e4f60a8b7c6d5e4f3a2b1\r\nMcp-Protocol-Version: 2025-11-25\r\n"
    b"User-Agent: python-httpx/0.28\r\nAccept-Encoding: gzip, deflate\r\nConnection: keep-alive\r\n"
    b"X-Request-Id: 42\r\nContent-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
)


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8765)}.get(name, default)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None: ...


async def app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def one_round(cls: Any, config: uvicorn.Config, requests: int) -> float:
    """Seconds for ``requests`` requests on one keep-alive connection."""
    loop = asyncio.get_running_loop()
    state = ServerState()
    proto = cls(config=config, server_state=state, app_state={}, _loop=loop)
    transport = _Transport()
    proto.connection_made(transport)
    started = time.perf_counter()
    for _ in range(requests):
        proto.data_received(REQUEST)
        while state.tasks:
            await asyncio.gather(*state.tasks)
    elapsed = time.perf_counter() - started
    proto.connection_lost(None)
    assert transport.written > 0
    return elapsed


async def run(requests: int, rounds: int) -> dict[str, float]:
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
    config.load()
    classes = {"httptools": HttpToolsProtocol, "limited": limited_protocol(ConnectionLimits()),
               "h11": H11Protocol}
    totals = dict.fromkeys(classes, 0.0)
    for cls in classes.values():
        await one_round(cls, config, 200)  # warm up
    for r in range(rounds):
        order = list(classes) if r % 2 == 0 else list(reversed(classes))
        for name in order:
            totals[name] += await one_round(classes[name], config, requests)
    return {name: total / (requests * rounds) * 1e6 for name, total in totals.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    per_request = asyncio.run(run(args.requests, args.rounds))
    base = per_request["httptools"]
    load = os.getloadavg()
    print(f"# HTTP protocol cost per request ({time.strftime('%Y-%m-%d %H:%M')}; {os.cpu_count()} CPUs, "
          f"load average {load[0]:.2f}; {args.requests} requests × {args.rounds} rounds each)\n")
    rows = [[name, f"{us:.1f}", f"{1e6 / us:.0f}", f"{us / base:.2f}×"] for name, us in per_request.items()]
    print(markdown_table(["protocol", "µs per request", "requests/s (one core)", "vs httptools"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
