"""The HTTP listener bounds what a client can make it hold before any authentication.

Raw sockets against a real hub process: oversized and countless headers get
``431`` and cost the hub no memory worth measuring, slowloris connections get
``408`` from the header timeout, and one address cannot hold more than its share
of connections that have not passed the guards.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc
import httpx2
import pytest

from tests.hubtest import HttpHub, http_hub, write_config

pytestmark = pytest.mark.anyio

MB = 1024 * 1024


def _rss_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


async def _read_until_closed(stream: anyio.abc.ByteStream, limit: float = 10) -> tuple[bytes, bool]:
    """What the hub sends, and whether it closed the connection within ``limit`` seconds."""
    data = b""
    with anyio.move_on_after(limit):
        while True:
            try:
                data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return data, True
    return data, False


async def _read_all(stream: anyio.abc.ByteStream, limit: float = 10) -> bytes:
    return (await _read_until_closed(stream, limit))[0]


async def _send_headers_then_read(hub: HttpHub, lines: list[bytes] | None, *, line: bytes = b"",
                                  repeat: int = 0) -> bytes:
    """Send a request head made of ``lines`` (or ``repeat`` × ``line``); return the answer."""
    stream = await anyio.connect_tcp("127.0.0.1", hub.port)
    async with stream:
        try:
            await stream.send(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            for chunk in (lines or []):
                await stream.send(chunk)
            for _ in range(repeat):
                await stream.send(line)
            await stream.send(b"\r\n")
        except (anyio.BrokenResourceError, OSError):
            pass  # the hub closed the connection mid-send: read what it answered
        return await _read_all(stream)


@pytest.fixture
def limits_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, "", hub="\n[hub.http]\nheader_timeout = 1.0\nmax_connections_per_ip = 1000\n")


async def test_huge_and_countless_headers_are_refused_without_memory_growth(
        limits_config: Path, tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with http_hub(limits_config, tmp_path) as hub:
            async with httpx2.AsyncClient() as client:
                ok = await client.get(f"{hub.base}/status.json", headers={f"x-h{i}": "v" for i in range(50)})
                assert ok.status_code == 200
            before = _rss_kb(hub.proc.pid, "VmRSS")
            big = b"X-Big: " + b"a" * MB + b"\r\n"

            async def flood() -> None:
                answer = await _send_headers_then_read(hub, None, line=big, repeat=50)
                assert answer.startswith(b"HTTP/1.1 431"), answer[:80]

            async with anyio.create_task_group() as tg:
                for _ in range(4):
                    tg.start_soon(flood)
            one = await _send_headers_then_read(hub, [big])
            assert one.startswith(b"HTTP/1.1 431"), one[:80]
            many = await _send_headers_then_read(hub, None, line=b"X-A: b\r\n", repeat=5000)
            assert many.startswith(b"HTTP/1.1 431"), many[:80]
            peak = _rss_kb(hub.proc.pid, "VmHWM")
            assert peak - before < 20 * 1024, (before, peak)
            async with httpx2.AsyncClient() as client:
                assert (await client.get(f"{hub.base}/healthz")).status_code == 200


async def test_slowloris_connections_are_closed_by_the_header_timeout(
        limits_config: Path, tmp_path: Path) -> None:
    closed: list[bytes] = []

    async def slowloris(hub: HttpHub) -> None:
        stream = await anyio.connect_tcp("127.0.0.1", hub.port)
        async with stream:
            await stream.send(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            answer = b""
            while True:
                try:
                    await stream.send(b"X-Slow: 1\r\n")  # one header line at a time, never done
                except (anyio.BrokenResourceError, OSError):
                    break
                with anyio.move_on_after(0.25):
                    try:
                        answer += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        break
            closed.append(answer + await _read_all(stream, 1))

    with anyio.fail_after(120):
        async with http_hub(limits_config, tmp_path) as hub:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for _ in range(200):
                        tg.start_soon(slowloris, hub)
            assert len(closed) == 200
            assert all(a.startswith(b"HTTP/1.1 408") for a in closed), {a[:40] for a in closed}
            # A connection that sends nothing at all is closed the same way.
            silent = await anyio.connect_tcp("127.0.0.1", hub.port)
            async with silent:
                assert (await _read_all(silent)).startswith(b"HTTP/1.1 408")


async def test_per_address_cap_on_connections_before_authentication(tmp_path: Path) -> None:
    config = write_config(tmp_path, "", hub="\n[hub.http]\nmax_connections_per_ip = 5\nheader_timeout = 30\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub:
            idle = [await anyio.connect_tcp("127.0.0.1", hub.port) for _ in range(5)]
            refused = await anyio.connect_tcp("127.0.0.1", hub.port)
            async with refused:
                assert (await _read_all(refused)).startswith(b"HTTP/1.1 503")
            await idle.pop().aclose()
            # A connection whose request passed the guards no longer counts.
            admitted = await anyio.connect_tcp("127.0.0.1", hub.port)
            await admitted.send(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert (await admitted.receive()).startswith(b"HTTP/1.1 200")
            another = await anyio.connect_tcp("127.0.0.1", hub.port)
            await another.send(b"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert (await another.receive()).startswith(b"HTTP/1.1 200")
            for stream in (*idle, admitted, another):
                await stream.aclose()


async def test_a_stalled_body_and_an_idle_keep_alive_connection_are_closed(tmp_path: Path) -> None:
    config = write_config(tmp_path, "", hub="\n[hub.http]\nbody_timeout = 1\nkeep_alive_timeout = 1\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub:
            stalled = await anyio.connect_tcp("127.0.0.1", hub.port)
            async with stalled:
                await stalled.send(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                   b"Content-Length: 1000\r\n\r\n{\"jsonrpc\"")
                # The body never completes: the connection ends (the app sees a disconnect).
                _, closed = await _read_until_closed(stalled, 30)
                assert closed
            idle = await anyio.connect_tcp("127.0.0.1", hub.port)
            async with idle:
                await idle.send(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer, closed = await _read_until_closed(idle, 30)  # the answer, then the close
                assert answer.startswith(b"HTTP/1.1 200") and closed


TOKEN = "s3cret-token-0123456789abcdef"
HUGE = 256 * MB
SID = "ab" * 16


@pytest.fixture
def auth_config(tmp_path: Path) -> Path:
    return write_config(tmp_path, '[profiles.narrow]\ntoolsets = ["hub"]\n', hub=(
        f'[hub.http]\nauth_tokens = ["{TOKEN}"]\nmax_connections_per_ip = 1000\n'))


async def _post_huge_body(hub: HttpHub, path: str, *, session: bool, chunked: bool) -> bytes:
    """POST a 256 MB body to ``path``, 1 MB per write, until the hub answers; return the answer."""
    head = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {TOKEN}",
            "Content-Type: application/json", "Accept: application/json, text/event-stream",
            "Transfer-Encoding: chunked" if chunked else f"Content-Length: {HUGE}"]
    if session:
        head.append(f"Mcp-Session-Id: {SID}")
    piece = b"a" * MB
    framed = b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece
    answer = b""
    stream = await anyio.connect_tcp("127.0.0.1", hub.port)
    async with stream:
        await stream.send(("\r\n".join(head) + "\r\n\r\n").encode())

        async def feed() -> None:
            try:
                for _ in range(HUGE // MB):
                    await stream.send(framed)
                if chunked:
                    await stream.send(b"0\r\n\r\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the hub closed the connection: what it answered is read below

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            with anyio.move_on_after(60):
                while b"\r\n" not in answer:
                    try:
                        answer += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        break
            tg.cancel_scope.cancel()
    return answer


async def test_a_huge_body_gets_413_on_every_route_without_memory_growth(
        auth_config: Path, tmp_path: Path) -> None:
    """Streamed, chunked or with its length declared, with or without a session id: the hub
    stops reading at ``max_body_bytes`` and answers 413, holding far less than the body."""
    routes = ["/mcp", "/p/narrow/mcp", f"/messages/?session_id={SID}",
              f"/p/narrow/messages/?session_id={SID}", "/status.json", "/healthz"]
    with anyio.fail_after(300):
        async with http_hub(auth_config, tmp_path) as hub:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx2.AsyncClient(timeout=30) as client:
                assert (await client.get(f"{hub.base}/status.json", headers=auth)).status_code == 200
            before = _rss_kb(hub.proc.pid, "VmRSS")
            answers = {}
            for session in (True, False):
                for chunked in (True, False):
                    for path in routes:
                        answer = await _post_huge_body(hub, path, session=session, chunked=chunked)
                        answers[(path, session, chunked)] = answer.split(b"\r\n", 1)[0]
            peak = _rss_kb(hub.proc.pid, "VmHWM")
            assert peak - before < 30 * 1024, (before, peak)
            refused = {key: line for key, line in answers.items() if not line.startswith(b"HTTP/1.1 413")}
            assert not refused, refused
            async with httpx2.AsyncClient(timeout=30) as client:  # and the hub serves on
                opened = await client.post(hub.mcp_url, headers={
                    **auth, "Accept": "application/json, text/event-stream"}, json={
                    "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "0"}}})
                assert opened.status_code == 200, opened.text


async def _send_head(hub: HttpHub, head: bytes, pieces: int, body: bytes = b"") -> bytes:
    """Send ``head`` (and ``body``) in ``pieces`` writes of equal size; return the answer."""
    data = head + body
    size = -(-len(data) // pieces)
    stream = await anyio.connect_tcp("127.0.0.1", hub.port)
    async with stream:
        try:
            for start in range(0, len(data), size):
                await stream.send(data[start:start + size])
        except (anyio.BrokenResourceError, OSError):
            pass  # the hub closed the connection mid-send: read what it answered
        return await _read_all(stream)


async def test_an_oversized_authorization_header_gets_431_however_it_arrives(
        auth_config: Path, tmp_path: Path) -> None:
    """The request head is measured whole, whether it comes in one read, in many, or in a
    read that also holds the start of the body; a head just under the limit is not refused."""
    def head(method: str, token_size: int, extra: str = "") -> bytes:
        return (f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                f"{'t' * token_size}\r\n{extra}\r\n").encode()

    with anyio.fail_after(120):
        async with http_hub(auth_config, tmp_path) as hub:
            answers = {}
            for size in (40 * 1024, 60 * 1024):
                for pieces in (1, 3, 64):
                    answers[("GET", size, pieces)] = await _send_head(hub, head("GET", size), pieces)
                    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
                    answers[("POST", size, pieces)] = await _send_head(
                        hub, head("POST", size, f"Content-Length: {len(body)}\r\n"), pieces, body)
            wrong = {key: answer[:40] for key, answer in answers.items()
                     if not answer.startswith(b"HTTP/1.1 431")}
            assert not wrong, wrong
            # Just under the limit, with the body in the same read: not a header problem.
            body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}' * 100
            under = await _send_head(hub, head("POST", 30 * 1024, f"Content-Length: {len(body)}\r\n"),
                                     1, body)
            assert under.startswith(b"HTTP/1.1 401"), under[:40]
