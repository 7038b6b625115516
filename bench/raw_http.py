"""A lean Streamable HTTP client for the benchmarks: HTTP/1.1 keep-alive over asyncio streams.

The SDK's client (httpx, an SSE parser per response, pydantic models) costs
more CPU than the servers it measures; on a two-core machine it would set the
pace. This client writes each POST as prepared bytes and reads the answer,
whether a JSON body (``Content-Length``) or an SSE stream (chunked), without
parsing more than the status line and headers. One :class:`RawSession` is one
MCP session; it holds several connections so that several requests of the
session are in flight at once, as a real client's would be.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RawConnection", "RawSession", "Sample"]


class RawConnection:
    """One keep-alive HTTP/1.1 connection to ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    async def post(self, path: str, body: bytes, headers: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
        """One POST; the status, the headers (lower-case names) and the whole body."""
        assert self.reader is not None and self.writer is not None
        head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + f"{self.host}:{self.port}".encode()
                + b"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream"
                + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + headers + b"\r\n")
        self.writer.write(head + body)
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        parsed: dict[bytes, bytes] = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            parsed[name.strip().lower()] = value.strip()
        if b"content-length" in parsed:
            data = await self.reader.readexactly(int(parsed[b"content-length"]))
        elif parsed.get(b"transfer-encoding", b"").lower() == b"chunked":
            data = await self._chunked()
        else:
            data = b""
        if parsed.get(b"content-encoding", b"").lower() == b"gzip":
            data = zlib.decompress(data, zlib.MAX_WBITS | 16)  # decoded, as httpx and fetch do
        return status, parsed, data

    async def _chunked(self) -> bytes:
        assert self.reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n"))[:-2].split(b";")[0], 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)


@dataclass
class Sample:
    """Latencies (seconds) and failures of one measured stretch."""

    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    first_error: str = ""
    #: CPU seconds the server process tree spent, and the calls completed meanwhile.
    cpu: float = 0.0
    cpu_calls: int = 0
    cpu_own: float = 0.0


class RawSession:
    """One MCP session (``initialize`` + ``notifications/initialized``) over ``width`` connections."""

    def __init__(self, host: str, port: int, path: str = "/mcp", width: int = 1,
                 gzip: bool = False, token: str | None = None) -> None:
        self.path = path
        #: Sent as ``Authorization: Bearer TOKEN`` on every request (a hub with tokens).
        self.auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
        #: Ask for gzip (``Accept-Encoding: gzip``, as httpx and fetch do); answers are decoded.
        self.gzip = gzip
        self.conns = [RawConnection(host, port) for _ in range(width)]
        self.sid = b""
        self._ids = 0

    async def open(self, version: str = "2025-11-25") -> None:
        for conn in self.conns:
            await conn.open()
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "raw-bench", "version": "1"}}}
        status, headers, body = await self.conns[0].post(self.path, json.dumps(init).encode(), self.auth)
        if status != 200 or b"mcp-session-id" not in headers:
            raise RuntimeError(f"initialize failed: {status} {body[:200]!r}")
        self.sid = headers[b"mcp-session-id"]
        await self.conns[0].post(self.path, b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                                 self._headers())

    def _headers(self) -> bytes:
        head = self.auth + b"Mcp-Session-Id: " + self.sid + b"\r\nMcp-Protocol-Version: 2025-11-25\r\n"
        return head + b"Accept-Encoding: gzip\r\n" if self.gzip else head

    async def close(self) -> None:
        for conn in self.conns:
            await conn.close()

    async def reconnect(self) -> None:
        """Fresh connections (servers close idle keep-alive connections after a few seconds)."""
        for conn in self.conns:
            await conn.close()
            await conn.open()

    def body(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if params is not None:
            message["params"] = params
        return json.dumps(message).encode()

    async def request(self, conn: int, method: str, params: dict[str, Any] | None = None) -> bytes:
        """One request on connection ``conn``; the body; ``RuntimeError`` unless it is a result."""
        status, _, data = await self.conns[conn].post(self.path, self.body(method, params), self._headers())
        if status != 200 or b'"result"' not in data:
            raise RuntimeError(f"{method}: {status} {data[:200]!r}")
        return data

    async def loop(self, conn: int, method: str, params: dict[str, Any] | None, until: float,
                   sample: Sample, limit: int = 1_000_000) -> None:
        """Requests back to back on one connection until ``until`` (perf_counter), bounded."""
        for _ in range(limit):
            if time.perf_counter() >= until:
                return
            started = time.perf_counter()
            try:
                await self.request(conn, method, params)
            except (RuntimeError, OSError, asyncio.IncompleteReadError) as exc:
                sample.errors += 1
                sample.first_error = sample.first_error or repr(exc)[:300]
                if isinstance(exc, (OSError, asyncio.IncompleteReadError)):
                    return  # the connection is gone
                continue
            sample.latencies.append(time.perf_counter() - started)
