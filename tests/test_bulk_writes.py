"""Large HTTP answers sent from the bulk writer's thread, on real loopback TCP connections.

The server side is the hub's :class:`CoalescingTransport` over the event loop's own
transport; the client is an asyncio stream that reads when the test says so.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from mcp_hub.downstream.http import bulk_writes
from mcp_hub.downstream.http import writes as http_writes
from mcp_hub.downstream.http.bulk_writes import BULK_BYTES, bulk_writer, socket_of
from mcp_hub.downstream.http.writes import CoalescingTransport

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[pytest.param(("asyncio", {}), id="asyncio"),
                        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop")])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """Both loops the hub serves on: asyncio's own, and uvloop (its default)."""
    return request.param


class _Server(asyncio.Protocol):
    """One accepted connection, its transport wrapped as the hub's HTTP protocol wraps it."""

    def __init__(self, made: asyncio.Future[_Server]) -> None:
        self.made = made
        self.transport: CoalescingTransport
        self.paused = 0
        self.resumed = asyncio.Event()
        self.lost = asyncio.Event()

    def connection_made(self, transport: Any) -> None:
        self.transport = CoalescingTransport(transport, asyncio.get_running_loop(), self)
        self.made.set_result(self)

    def pause_writing(self) -> None:
        self.paused += 1

    def resume_writing(self) -> None:
        self.resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.set()


@asynccontextmanager
async def _pair() -> AsyncIterator[tuple[_Server, asyncio.StreamReader, asyncio.StreamWriter]]:
    loop = asyncio.get_running_loop()
    made: asyncio.Future[_Server] = loop.create_future()
    server = await loop.create_server(lambda: _Server(made), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        with anyio.fail_after(10):
            side = await made
        assert side.transport.offloads
        yield side, reader, writer
    finally:
        writer.close()
        server.close()


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while chunk := await reader.read(1 << 20):
        parts.append(chunk)
    return b"".join(parts)


async def test_a_large_write_and_the_writes_after_it_arrive_whole_and_in_order() -> None:
    # More than the loopback socket buffers take in while the client does not read.
    big, later = os.urandom(24 << 20), [os.urandom(n) for n in (10, 70_000, 3)]
    started = bulk_writer().started
    async with _pair() as (side, reader, _):
        side.transport.write(b"head:")
        side.transport.write(big)  # joined with the head in this turn, and handed over
        await asyncio.sleep(0)  # the next turn: the client has not read, so the thread still holds bytes
        assert side.transport.get_write_buffer_size() > 0
        for piece in later:
            side.transport.write(piece)
            await asyncio.sleep(0)
        side.transport.close()  # waits for the thread to send what it holds
        assert side.transport.is_closing()
        with anyio.fail_after(30):
            got = await _read_all(reader)
    assert got == b"head:" + big + b"".join(later)
    assert bulk_writer().started == started + 1


async def test_small_writes_stay_on_the_transport() -> None:
    started = bulk_writer().started
    async with _pair() as (side, reader, _):
        side.transport.write(b"x" * (BULK_BYTES - 100))
        side.transport.close()
        with anyio.fail_after(10):
            assert await _read_all(reader) == b"x" * (BULK_BYTES - 100)
    assert bulk_writer().started == started


async def test_a_client_that_goes_away_mid_answer_ends_the_connection() -> None:
    async with _pair() as (side, _, writer):
        side.transport.write(os.urandom(16 << 20))
        await asyncio.sleep(0)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # a reset, with megabytes unread
        with anyio.fail_after(10):
            await side.lost.wait()


async def test_abort_drops_the_rest_and_lets_go_of_the_socket() -> None:
    big = os.urandom(16 << 20)
    async with _pair() as (side, reader, _):
        side.transport.write(big)
        await asyncio.sleep(0)
        side.transport.abort()
        with anyio.fail_after(10):
            # The client sees the end once the thread has closed its copy of the socket too.
            try:
                got = await _read_all(reader)
            except ConnectionResetError:
                got = b""
            await side.lost.wait()
    assert len(got) < len(big) and big.startswith(got)


async def test_the_protocol_is_paused_past_high_water_and_resumed_once_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_writes, "HIGH_WATER", 1 << 20)
    monkeypatch.setattr(bulk_writes, "LOW_WATER", 256 << 10)
    data = [os.urandom(4 << 20), os.urandom(4 << 20)]
    async with _pair() as (side, reader, _):
        side.transport.write(data[0])
        await asyncio.sleep(0)
        side.transport.write(data[1])  # behind the first, past the high water mark
        await asyncio.sleep(0)
        assert side.paused == 1
        with anyio.fail_after(30):
            got = await reader.readexactly(8 << 20)
            await side.resumed.wait()
    assert got == b"".join(data)


async def test_a_client_that_stops_reading_is_dropped_after_the_stall_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk_writes, "STALL_SECONDS", 0.3)
    stalled = bulk_writer().stalled
    async with _pair() as (side, _, _):
        side.transport.write(os.urandom(32 << 20))  # more than the socket buffers hold
        with anyio.fail_after(15):
            await side.lost.wait()
    assert bulk_writer().stalled == stalled + 1


def test_tls_and_non_stream_transports_keep_their_own_writes() -> None:
    class _Fake:
        def __init__(self, **extra: Any) -> None:
            self.extra = extra

        def get_extra_info(self, name: str, default: Any = None) -> Any:
            return self.extra.get(name, default)

    with socket.socket() as tcp, socket.socket(type=socket.SOCK_DGRAM) as udp:
        assert socket_of(_Fake(socket=tcp)) == tcp.fileno()
        assert socket_of(_Fake(socket=tcp, sslcontext=object())) is None
        assert socket_of(_Fake(socket=udp)) is None
        assert socket_of(_Fake()) is None
