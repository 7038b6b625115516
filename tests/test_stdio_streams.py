"""The streams between the SDK session and a stdio child, without tasks of their own.

:class:`StdoutReadStream` parses stdout in the receiving task; :class:`StdinWriteStream`
writes into stdin in the sending task. These check the ends of both: messages keep
their order across chunks, the child's EOF is reported once, a broken pipe ends the
read side at once (waking a receive that waits), and a closed stream says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import mcp.types as types
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared.message import SessionMessage

from mcp_hub.upstream.stdio.reader import StdoutReadStream
from mcp_hub.upstream.stdio.writer import StdinWriteStream, encode

pytestmark = pytest.mark.anyio


async def _chunks(recv: MemoryObjectReceiveStream[bytes]) -> AsyncIterator[bytes]:
    async for chunk in recv:
        yield chunk


def _lines(chunk: bytes) -> list[bytes]:
    return [line for line in chunk.split(b"\n") if line]


async def test_messages_in_order_then_eof_reported_once() -> None:
    send, recv = anyio.create_memory_object_stream[bytes](10)
    eofs: list[str] = []
    stream = StdoutReadStream(_chunks(recv), _lines, lambda: eofs.append("eof"))
    await send.send(b"a\nb\n")
    await send.send(b"c\n")
    send.close()
    with anyio.fail_after(5):
        got = [item async for item in stream]
    assert got == [b"a", b"b", b"c"]
    assert eofs == ["eof"]
    with pytest.raises(anyio.EndOfStream):
        await stream.receive()
    assert eofs == ["eof"]


async def test_end_wakes_a_waiting_receive_and_reports() -> None:
    send, recv = anyio.create_memory_object_stream[bytes](10)
    eofs: list[str] = []
    stream = StdoutReadStream(_chunks(recv), _lines, lambda: eofs.append("eof"))
    outcome: list[BaseException] = []

    async def reader() -> None:
        try:
            await stream.receive()
        except anyio.EndOfStream as exc:
            outcome.append(exc)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            await anyio.wait_all_tasks_blocked()
            stream.end()
    assert len(outcome) == 1
    assert eofs == ["eof"]
    send.close()


async def test_closed_read_stream_refuses() -> None:
    send, recv = anyio.create_memory_object_stream[bytes](10)
    stream = StdoutReadStream(_chunks(recv), _lines, lambda: None)
    async with stream:
        pass
    with pytest.raises(anyio.ClosedResourceError):
        await stream.receive()
    send.close()


class _Pipe:
    def __init__(self, broken: bool = False) -> None:
        self.written: list[bytes] = []
        self.broken = broken

    async def send(self, data: bytes) -> None:
        if self.broken:
            raise BrokenPipeError("the child stopped reading")
        self.written.append(data)


def _ping(rid: int) -> SessionMessage:
    return SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=rid, method="ping"))


async def test_write_stream_writes_lines_in_order() -> None:
    pipe = _Pipe()
    stream = StdinWriteStream(pipe, lambda: None)
    await stream.send(_ping(1))
    await stream.send(_ping(2))
    assert pipe.written == [encode(_ping(1)), encode(_ping(2))]
    assert pipe.written[0] == b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


async def test_broken_pipe_ends_the_session() -> None:
    ended: list[bool] = []
    stream = StdinWriteStream(_Pipe(broken=True), lambda: ended.append(True))
    with pytest.raises(anyio.BrokenResourceError):
        await stream.send(_ping(1))
    assert ended == [True]
    with pytest.raises(anyio.ClosedResourceError):
        await stream.send(_ping(2))


async def test_closed_write_stream_refuses() -> None:
    pipe = _Pipe()
    async with StdinWriteStream(pipe, lambda: None) as stream:
        await stream.send(_ping(1))
    with pytest.raises(anyio.ClosedResourceError):
        await stream.send(_ping(2))
    assert len(pipe.written) == 1
