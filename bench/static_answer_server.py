"""An HTTP/1.1 server that answers every request with the same bytes: the no-hub control.

    python bench/static_answer_server.py BODY_FILE PORT_FILE [--gzip]

It stands in for "some server on this machine" in ``bench/list_bench.py``: a
client fetching the hub's 1.7 MB list answer in a loop from here puts the same
bytes through the same loopback sockets and the same client code as listing
through the hub, with no hub work at all. What the other client's calls lose
meanwhile is then the machine's share (two cores, copies, caches), which the
hub cannot remove. The answer is written from the event loop (uvloop where
installed), as a plain asyncio server would; ``--gzip`` sends the body
gzip-encoded (compressed once at start). The chosen port is written to
PORT_FILE once listening.
"""

from __future__ import annotations

import asyncio
import sys
import zlib
from pathlib import Path
from typing import Any


class _Answer(asyncio.Protocol):
    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.buffer = b""
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # uvloop's transports are not asyncio.Transport subclasses

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            assert self.transport is not None
            self.transport.write(self.answer)


async def _serve(answer: bytes, port_file: Path) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Answer(answer), "127.0.0.1", 0)
    port_file.write_text(str(server.sockets[0].getsockname()[1]))
    async with server:
        await server.serve_forever()


def main() -> None:
    body = Path(sys.argv[1]).read_bytes()
    gzipped = "--gzip" in sys.argv[3:]
    if gzipped:
        packer = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        body = packer.compress(body) + packer.flush()
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + (b"\r\ncontent-encoding: gzip" if gzipped else b"") + b"\r\n\r\n")
    try:
        import uvloop
    except ImportError:
        asyncio.run(_serve(head + body, Path(sys.argv[2])))
    else:
        uvloop.run(_serve(head + body, Path(sys.argv[2])))


if __name__ == "__main__":
    main()
