"""SSE answers and SSE polling (SEP-1699) through the hub, over real HTTP on loopback.

The hub answers a POST as an SSE stream that opens with a priming event (an
event id, ``retry``, empty data) on the fast path as on the SDK path
(``[hub.http] answers = "sse"``, the default); ``"json"`` keeps plain JSON
bodies. An upstream that closes its stream of a call mid-call (the project's
conformance fixture, ``test_reconnection``, over Streamable HTTP with an event
store) makes the hub close its client's stream of that call in turn, after the
priming event; the client's ``GET`` with ``Last-Event-ID`` then gets the answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.erastest import asking_over_http
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, write_config

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
FIXTURE = ["-m", "tests.fixtures.conformance_server", "--transport", "http"]


async def _open(client: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A 2025-11-25 session; the headers of its later requests."""
    r = await client.post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers = {**HEADERS, "mcp-session-id": r.headers["mcp-session-id"],
               "mcp-protocol-version": "2025-11-25"}
    r = await client.post(url, headers=headers,
                          content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert r.status_code == 202
    # A first list, as a real client makes, leaves the session live for the fast path.
    r = await client.post(url, headers=headers,
                          content=b'{"jsonrpc":"2.0","id":"first","method":"tools/list"}')
    assert r.status_code == 200, r.text
    return headers


def _events(text: str) -> list[dict[str, str]]:
    """The SSE events of a body, each as its fields (``data`` lines joined)."""
    events: list[dict[str, str]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = fields[name] + "\n" + value if name in fields else value
        if fields:
            events.append(fields)
    return events


def _answer(events: list[dict[str, str]], rid: Any) -> dict[str, Any] | None:
    for event in events:
        if event.get("data"):
            message = json.loads(event["data"])
            if message.get("id") == rid and ("result" in message or "error" in message):
                return dict(message)
    return None


def _call(rid: Any, name: str, arguments: dict[str, Any] | None = None) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments or {}}}).encode()


@pytest.fixture
async def echo_url(tmp_path: Path) -> AsyncIterator[str]:
    async with http_hub(write_config(tmp_path, echo_server_toml()), tmp_path) as hub:
        yield hub.mcp_url


async def test_a_fast_path_call_is_a_stream_opening_with_a_priming_event_and_retry(
    echo_url: str,
) -> None:
    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=30) as client:
            headers = await _open(client, echo_url)
            r = await client.post(echo_url, headers=headers,
                                  content=_call(7, "echo_echo", {"text": "hi"}))
            status = (await client.get(echo_url.replace("/mcp", "/status.json"))).json()
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    assert events[0].get("id") and events[0].get("data", "") == "", events
    assert events[0].get("retry") == "1000", events
    answer = _answer(events, 7)
    assert answer is not None and answer["result"]["content"][0]["text"] == "hi", events
    assert status["http_fast_path"]["tools/call"] == 1  # the fast path answered it


async def test_concurrent_posts_are_each_a_stream_with_its_answer(echo_url: str) -> None:
    answers: dict[int, httpx2.Response] = {}

    async def post(client: httpx2.AsyncClient, headers: dict[str, str], n: int) -> None:
        answers[n] = await client.post(echo_url, headers=headers, content=json.dumps(
            {"jsonrpc": "2.0", "id": n, "method": "tools/list"}).encode())

    with anyio.fail_after(60):
        async with httpx2.AsyncClient(timeout=30) as client:
            headers = await _open(client, echo_url)
            async with anyio.create_task_group() as tg:
                for n in (1, 2, 3):
                    tg.start_soon(post, client, headers, n)
    for n, r in answers.items():
        assert r.headers["content-type"].startswith("text/event-stream"), (n, r.headers)
        events = _events(r.text)
        assert events[0].get("id") and events[0].get("data", "") == "", events
        answer = _answer(events, n)
        assert answer is not None and any(t["name"] == "echo_echo"
                                          for t in answer["result"]["tools"])


async def test_answers_json_keeps_plain_json_bodies(tmp_path: Path) -> None:
    config = write_config(tmp_path, '[hub.http]\nanswers = "json"\n\n' + echo_server_toml())
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
            headers = await _open(client, hub.mcp_url)
            r = await client.post(hub.mcp_url, headers=headers,
                                  content=_call(3, "echo_echo", {"text": "j"}))
    assert r.headers["content-type"] == "application/json"
    assert r.json()["result"]["content"][0]["text"] == "j"


async def _poll(url: str, lead: bytes) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``test_reconnection`` through the hub: the events of its POST stream, then those of
    the GET that resumes it from the POST stream's last event id (until the answer)."""
    async with httpx2.AsyncClient(timeout=30) as client:
        headers = await _open(client, url)
        r = await client.post(url, headers=headers, content=lead + _call(1, "test_reconnection"))
        assert r.headers["content-type"].startswith("text/event-stream")
        first = _events(r.text)  # read to its end: the hub closed it
        cursor = first[-1].get("id") if first else None
        if not cursor or _answer(first, 1) is not None:
            return first, []
        # A resumed stream may itself be closed for polling (the upstream closed its own
        # again): the client resumes again from the last event it saw, as SEP-1699 says.
        resumed: list[dict[str, str]] = []
        for _ in range(5):
            async with client.stream("GET", url, headers={
                    **headers, "Accept": "text/event-stream", "last-event-id": cursor}) as again:
                assert again.status_code == 200
                text = ""
                async for chunk in again.aiter_text():
                    text += chunk
                    events = _events(text)
                    if _answer(events, 1) is not None:
                        return first, resumed + events
            events = _events(text)
            resumed += events
            cursor = next((e["id"] for e in reversed(events) if e.get("id")), cursor)
        return first, resumed


@pytest.mark.parametrize("lead", [b"", b" "], ids=["fast-path", "sdk-path"])
async def test_an_upstream_closing_its_stream_mid_call_closes_the_clients_and_resume_answers(
    tmp_path: Path, lead: bytes,
) -> None:
    # A leading space is valid JSON that the fast path leaves to the SDK path.
    upstream = asking_over_http(FIXTURE, "conf", 'prefix = ""\nprotocol = "2025"\n')
    with anyio.fail_after(90):
        async with upstream as block, http_hub(write_config(tmp_path, block), tmp_path) as hub:
            first, resumed = await _poll(hub.mcp_url, lead)
    assert first and first[0].get("id") and first[0].get("data", "") == "", first
    assert first[0].get("retry") == "1000", first
    assert _answer(first, 1) is None, first  # closed before the answer, as the upstream did
    answer = _answer(resumed, 1)
    assert answer is not None, resumed
    assert answer["result"]["content"][0]["text"] == "Reconnection test completed successfully"


async def test_only_a_get_of_the_same_upstream_with_a_calls_cursor_closes_it() -> None:
    from mcp_hub.upstream.polling import CallCursor, StreamPolls

    closed: list[str] = []

    async def on_closed() -> None:
        closed.append("call")

    mine, other = StreamPolls(), StreamPolls()
    cursor = CallCursor(on_closed)
    cursor.polls = mine
    await cursor("s1::1")  # the priming event
    await cursor("s1::2")  # a later event: the cursor moves on
    assert len(mine) == 1

    def get(last: str, method: str = "GET") -> httpx2.Request:
        return httpx2.Request(method, "http://127.0.0.1/mcp", headers={"last-event-id": last})

    await other.on_request(get("s1::2"))  # another upstream's ids close nothing
    await mine.on_request(get("s1::1"))  # nor a cursor the call moved past
    await mine.on_request(get("s1::2", "POST"))
    assert closed == []
    await mine.on_request(get("s1::2"))
    assert closed == ["call"] and len(mine) == 0
    cursor.done()


async def test_a_large_list_is_one_event_after_the_priming_event(tmp_path: Path) -> None:
    # 300 real tools (about 500 KB): written in pieces, as one SSE event equal to the SDK's.
    catalog = [str(ROOT / "bench" / "catalog_server.py"), "300"]
    config = write_config(tmp_path, "\n".join([
        '[tool_search]', 'mode = "off"', '', '[servers.cat]', f"command = {json.dumps(PY)}",
        f"args = {json.dumps(catalog)}", f"cwd = {json.dumps(str(ROOT))}", ""]))
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path, timeout=60) as hub, \
                httpx2.AsyncClient(timeout=30, headers={"accept-encoding": "identity"}) as client:
            headers = await _open(client, hub.mcp_url)
            body = b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}'
            fast = await client.post(hub.mcp_url, headers=headers, content=body)
            slow = await client.post(hub.mcp_url, headers=headers, content=b" " + body)
    assert fast.headers["content-type"].startswith("text/event-stream")
    assert int(fast.headers["content-length"]) == len(fast.content) > 3 * 128 * 1024
    events = _events(fast.text)
    assert events[0].get("id") and events[0].get("data", "") == "", events[0]
    assert [e["data"] for e in events[1:]] == [e["data"] for e in _events(slow.text)
                                              if '"result"' in e.get("data", "")]
    assert len(json.loads(events[1]["data"])["result"]["tools"]) >= 300
