"""A response's writes during one event-loop turn leave the socket as one write."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcp_hub.downstream.http.writes import CoalescingTransport

pytestmark = pytest.mark.anyio


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.eof = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def write_eof(self) -> None:
        self.eof = True

    def abort(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else None


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_headers_and_body_of_one_turn_are_one_write() -> None:
    raw = _Recorder()
    t = CoalescingTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    t.write(b"{}")
    assert raw.writes == [] and t.get_write_buffer_size() == 40
    await asyncio.sleep(0)
    assert raw.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
    t.write(b"event 2")  # a later turn: a write of its own
    await asyncio.sleep(0)
    assert raw.writes[1:] == [b"event 2"]
    assert t.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is the transport's


async def test_close_and_eof_write_what_is_queued_first_and_abort_drops_it() -> None:
    raw = _Recorder()
    t = CoalescingTransport(raw, asyncio.get_running_loop())  # type: ignore[arg-type]
    t.write(b"last words")
    t.write_eof()
    assert raw.writes == [b"last words"] and raw.eof
    t.write(b"bye")
    t.close()
    assert raw.writes[-1] == b"bye" and raw.closed
    raw2 = _Recorder()
    t2 = CoalescingTransport(raw2, asyncio.get_running_loop())  # type: ignore[arg-type]
    t2.write(b"never sent")
    t2.abort()
    await asyncio.sleep(0)
    assert raw2.writes == [] and raw2.closed
