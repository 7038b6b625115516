"""Dropped Streamable HTTP clients: resumption with Last-Event-ID, or cancellation upstream.

A real HTTP hub with one real stdio upstream (``plain_server``). The clients
speak raw HTTP so that a stream can be dropped and resumed exactly as a
2025-11-25 client does, or be a separate process killed with ``kill -9``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp.types import JSONRPCMessage, JSONRPCNotification

from mcp_hub.downstream.http.event_store import BoundedEventStore
from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import http_hub, sse_events

pytestmark = pytest.mark.anyio

GRACE = 2.0
DROPS = int(__import__("os").environ.get("DROPS", "1000"))
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _config(tmp: Path, *, http: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        f"[hub]\nstartup_timeout = 20\n\n[hub.http]\nresume_grace_seconds = {GRACE}\n{http}\n"
        f"[servers.work]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n"
        f"env = {{ PLAIN_MARKER = {toml_str(str(tmp / 'marker'))} }}\n")
    return path


def _marker(tmp: Path) -> str:
    path = tmp / "marker"
    return path.read_text() if path.exists() else ""


async def _open_session(http: httpx2.AsyncClient, url: str) -> str:
    r = await http.post(url, headers={"Accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "resumer", "version": "1"}}})
    assert r.status_code == 200, r.text
    session = r.headers["mcp-session-id"]
    headers = _headers(session)
    await http.post(url, headers=headers,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


def _headers(session: str) -> dict[str, str]:
    return {"Accept": ACCEPT, "mcp-session-id": session, "mcp-protocol-version": VERSION}


def _call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    # The progress token keeps the call on an SSE stream (a plain call may be answered
    # as one JSON body by the fast path, which has no events to resume).
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"progressToken": f"p{rid}"}}}


async def test_drop_and_resume_with_last_event_id_gets_the_result(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with http_hub(_config(tmp_path), tmp_path) as hub, httpx2.AsyncClient(
                timeout=httpx2.Timeout(30)) as http:
            session = await _open_session(http, hub.mcp_url)
            last: str | None = None
            async with http.stream("POST", hub.mcp_url, headers=_headers(session),
                                   json=_call(7, "work_sleep", {"seconds": 1.5})) as r:
                async for event_id, _ in sse_events(r):
                    last = event_id  # the priming event: a cursor to resume from
                    break
            assert last is not None
            # The stream is gone (closed above) while the call runs on.
            headers = {**_headers(session), "Last-Event-ID": last}
            async with http.stream("GET", hub.mcp_url, headers=headers) as r:
                assert r.status_code == 200
                async for _, data in sse_events(r):
                    if not data:
                        continue
                    message = json.loads(data)
                    if message.get("id") == 7:
                        assert message["result"]["content"][0]["text"] == "slept"
                        break
            assert "cancelled" not in _marker(tmp_path)


_KILLED_CLIENT = r"""
import http.client, json, sys
host, port = sys.argv[1], int(sys.argv[2])
def post(body, session=None):
    c = http.client.HTTPConnection(host, port)
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
         "mcp-protocol-version": "2025-11-25"}
    if session:
        h["mcp-session-id"] = session
    c.request("POST", "/mcp", json.dumps(body), h)
    return c.getresponse()
r = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "k", "version": "1"}}})
session = r.getheader("mcp-session-id"); r.read()
post({"jsonrpc": "2.0", "method": "notifications/initialized"}, session).read()
post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, session).read()
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "work_hang", "arguments": {}}}
if sys.argv[3] == "sse":  # a progress token keeps the call on its SSE stream
    call["params"]["_meta"] = {"progressToken": "p1"}
    r = post(call, session)
    r.fp.readline()
else:  # a plain call: the fast path answers it with one JSON body, at the end
    c = http.client.HTTPConnection(host, port)
    c.request("POST", "/mcp", json.dumps(call), {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25", "mcp-session-id": session})
print("calling", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("stream", ["sse", "json"])
async def test_killed_client_gets_its_call_cancelled_upstream(tmp_path: Path, stream: str) -> None:
    with anyio.fail_after(90):
        async with http_hub(_config(tmp_path), tmp_path) as hub:
            client = subprocess.Popen(
                [sys.executable, "-c", _KILLED_CLIENT, "127.0.0.1", str(hub.port), stream],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                assert client.stdout is not None
                line = await anyio.to_thread.run_sync(client.stdout.readline)
                assert line.strip() == b"calling"
                while "called hang" not in _marker(tmp_path):  # bounded by fail_after
                    await anyio.sleep(0.05)
                client.send_signal(signal.SIGKILL)
                await anyio.to_thread.run_sync(client.wait)
                # Bounded by fail_after: only the end of the resume grace cancels the
                # call before it (the session's idle timeout is an hour away).
                while "cancelled" not in _marker(tmp_path):
                    await anyio.sleep(0.05)
            finally:
                if client.poll() is None:
                    client.kill()
                    client.wait()


async def test_event_store_stays_bounded_under_1000_dropped_streams(tmp_path: Path) -> None:
    bound = 200
    config = _config(tmp_path, http=f"event_store_max_events = {bound}\n")
    with anyio.fail_after(300):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(
                timeout=httpx2.Timeout(30)) as http:
            session = await _open_session(http, hub.mcp_url)
            limit = anyio.Semaphore(16)
            peak = 0

            async def drop(rid: int) -> None:
                async with limit, http.stream(
                        "POST", hub.mcp_url, headers=_headers(session),
                        json=_call(rid, "work_sleep", {"seconds": 0.2})) as r:
                    async for _ in sse_events(r):
                        break  # dropped right after the priming event

            async def sample() -> None:
                nonlocal peak
                status = json.loads((await http.get(f"{hub.base}/status.json")).text)
                peak = max(peak, status["resumption"]["events"])

            async with anyio.create_task_group() as tg:
                for rid in range(1, DROPS + 1):
                    tg.start_soon(drop, rid)
                    if rid % 100 == 0:
                        tg.start_soon(sample)
            await sample()
            status = json.loads((await http.get(f"{hub.base}/status.json")).text)
            assert status["resumption"]["max_events"] == bound
            assert 0 < status["resumption"]["events"] <= bound
            assert peak <= bound


async def test_bounded_store_evicts_oldest_and_never_replays_across_sessions() -> None:
    store = BoundedEventStore(100)
    first, other = store.view(), store.view()
    first.session_id, other.session_id = "a", "b"
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={})
    ids = []
    for stream in range(1000):
        ids.append(await first.store_event(str(stream), None))
        await first.store_event(str(stream), note)
        assert len(store) <= 100
    sent: list[JSONRPCMessage] = []

    async def collect(event: Any) -> None:
        sent.append(event.message)

    assert await first.replay_events_after(ids[0], collect) is None  # evicted long ago
    assert await other.replay_events_after(ids[-1], collect) is None  # not its session
    assert await first.replay_events_after(ids[-1], collect) == "999"
    assert sent == [note]
    first_streams = store.streams
    store.forget(first)
    assert len(store) == 0 and store.streams == 0 < first_streams


async def test_sse_connection_closing_cancels_its_calls_upstream(tmp_path: Path) -> None:
    """Legacy SSE cannot resume: the connection closing is the end of its calls.

    The resume grace is 600 s, far beyond the test's bound: a closed SSE stream kept
    for resumption like a Streamable HTTP one would fail the test at ``fail_after``.
    """
    config = _config(tmp_path)
    config.write_text(config.read_text().replace(f"resume_grace_seconds = {GRACE}",
                                                 "resume_grace_seconds = 600"))
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(
                timeout=httpx2.Timeout(30)) as http:
            async with http.stream("GET", f"{hub.base}/sse") as stream:
                events = sse_events(stream)
                _, endpoint = await events.__anext__()
                url = f"{hub.base}{endpoint}"
                for body in (
                    {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                        "protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "sse", "version": "1"}}},
                    {"jsonrpc": "2.0", "method": "notifications/initialized"},
                    _call(1, "work_hang", {}),
                ):
                    assert (await http.post(url, json=body)).status_code == 202
                while "called hang" not in _marker(tmp_path):  # bounded by fail_after
                    await anyio.sleep(0.05)
            # The GET stream is closed: no DELETE, no cancel. The window of a stream that
            # cannot be resumed is zero, so the cancel comes long before the grace ends.
            while "cancelled" not in _marker(tmp_path):
                await anyio.sleep(0.05)


async def test_a_session_ending_cancels_its_calls_upstream(tmp_path: Path) -> None:
    config = _config(tmp_path, http="")
    config.write_text(config.read_text().replace(f"resume_grace_seconds = {GRACE}",
                                                 "resume_grace_seconds = 600"))
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(
                timeout=httpx2.Timeout(30)) as http:
            session = await _open_session(http, hub.mcp_url)
            async with http.stream("POST", hub.mcp_url, headers=_headers(session),
                                   json=_call(3, "work_hang", {})) as r:
                async for _ in sse_events(r):
                    break
            while "called hang" not in _marker(tmp_path):  # bounded by fail_after
                await anyio.sleep(0.05)
            # The stream dropped and the window is long, but the session ends now.
            deleted = await http.delete(hub.mcp_url, headers=_headers(session))
            assert deleted.status_code == 200
            while "cancelled" not in _marker(tmp_path):
                await anyio.sleep(0.05)


async def test_bounded_store_keeps_response_bytes_bounded_and_drops_delivered_streams() -> None:
    from mcp.types import JSONRPCResponse

    store = BoundedEventStore(10_000, max_bytes=50_000)
    view = store.view()
    store.bind(view, "s")
    big = JSONRPCResponse(jsonrpc="2.0", id=1, result={"text": "x" * 10_000})
    for stream in range(100):
        await view.store_event(str(stream), big)
        assert store.bytes <= 50_000
    assert len(store) <= 5
    kept = store.streams
    store.delivered("s", "99")
    assert store.streams == kept - 1
    store.delivered("other-session", "98")  # another session's stream ids are not its own
    assert store.streams == kept - 1


async def _first_event_fields(response: httpx2.Response) -> dict[str, str]:
    """The fields (``id``, ``retry``, ``data``, …) of the first SSE event of ``response``."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if fields:
                return fields
            continue
        key, _, value = line.partition(":")
        fields[key] = value.lstrip()
    return fields


@pytest.mark.parametrize(("setting", "retry"), [("", "1000"), ("sse_retry_ms = 250\n", "250"),
                                                ("sse_retry_ms = 0\n", None)])
async def test_a_call_stream_opens_with_a_priming_event_and_retry(
    tmp_path: Path, setting: str, retry: str | None,
) -> None:
    # SSE polling (2025-11-25): the first event has an id and empty data, so the client
    # can resume from it at once; ``retry`` says how long to wait before reconnecting.
    with anyio.fail_after(60):
        async with http_hub(_config(tmp_path, http=setting), tmp_path) as hub, \
                httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as http:
            session = await _open_session(http, hub.mcp_url)
            async with http.stream("POST", hub.mcp_url, headers=_headers(session),
                                   json=_call(3, "work_echo", {"text": "x"})) as r:
                assert r.headers["content-type"].startswith("text/event-stream")
                first = await _first_event_fields(r)
    assert first.get("id")
    assert first.get("data", "") == ""
    assert first.get("retry") == retry


class _Transport:
    """What the event store reads of a session's SDK transport: its registered streams."""

    def __init__(self) -> None:
        self._request_streams: dict[str, object] = {}
        self.is_terminated = False


async def test_a_message_for_a_just_replayed_stream_waits_until_the_stream_is_live() -> None:
    # The SDK registers a resumed stream a few loop turns after its replay; a message
    # stored in between would be neither replayed nor sent live.
    store = BoundedEventStore(100)
    view = store.view()
    view.session_id, view.transport = "s", _Transport()
    note = JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={})
    cursor = await view.store_event("7", None)

    async def ignore(event: Any) -> None:
        pass

    assert await view.replay_events_after(cursor, ignore) == "7"
    order: list[str] = []

    async def answer() -> None:
        await view.store_event("7", note)
        order.append("stored")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer)
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            order.append("registered")
            view.transport._request_streams["7"] = object()
    assert order == ["registered", "stored"]
    # Once seen live, later messages of the stream do not wait.
    with anyio.fail_after(1):
        await view.store_event("7", note)


@pytest.mark.parametrize(("body", "kind"), [
    (b'event: message\r\ndata: {"jsonrpc":"2.0","id":1,"result":{"t":"\\"method\\""}}\r\n\r\n',
     b"result"),
    (b'id: 2\ndata: \n\ndata: {"jsonrpc":"2.0","id":"a","error":{"code":1}}\n\n', b"error"),
    (b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"result":1}}\n\n',
     b"method"),
    (b'data: {"jsonrpc":"2.0","id":1,"result":{}}\n\ndata: {"jsonrpc":"2.0","id":"h1",'
     b'"method":"sampling/createMessage"}\n\n', b"method"),
    (b"id: 1\r\nretry: 1000\r\ndata: \r\n\r\n", None),
])
def test_the_last_event_of_a_stream_tells_an_answer_from_a_notification(
        body: bytes, kind: bytes | None) -> None:
    # What decides whether a closed stream was answered (else its events wait for a resume).
    from mcp_hub.downstream.http.resume import _message_kind
    assert _message_kind(body) == kind
