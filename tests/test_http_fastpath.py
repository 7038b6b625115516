"""The HTTP fast path against a real hub (uvicorn on a loopback port) and the echo upstream.

Raw HTTP shows what goes over the wire with ``[hub.http] answers = "json"``
(a plain JSON body, or SSE where the call needs the client); the SDK's own ClientSession shows that clients see the
same answers either way. A body with a leading space is valid JSON the fast
path leaves to the SDK path, which gives the SDK's own bytes to compare with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import types
from mcp.client.context import ClientRequestContext

from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class RawSession:
    """A Streamable HTTP session driven with plain HTTP requests."""

    def __init__(self, client: httpx2.AsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self.sid = ""
        self._ids = 0

    async def open(self) -> None:
        r = await self.client.post(self.url, headers=HEADERS, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"}}})
        assert r.status_code == 200, r.text
        self.sid = r.headers["mcp-session-id"]
        r = await self.post_raw(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        assert r.status_code == 202
        # The 202 comes before the hub has handled the notification; a first list (as a
        # real client makes) is served either way and leaves the session live.
        r = await self.post_raw(b'{"jsonrpc":"2.0","id":"first","method":"tools/list"}')
        assert r.status_code == 200, r.text

    async def post_raw(self, body: bytes) -> httpx2.Response:
        return await self.client.post(self.url, content=body,
                                      headers={**HEADERS, "mcp-session-id": self.sid})

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      lead: bytes = b"") -> httpx2.Response:
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if params is not None:
            message["params"] = params
        return await self.post_raw(lead + json.dumps(message).encode())


def sse_data(text: str) -> list[str]:
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


@pytest.fixture
async def hub_url(tmp_path: Path) -> AsyncIterator[str]:
    # Plain JSON bodies (``answers = "json"``); SSE answers: tests/test_sse_polling.py.
    config = write_config(tmp_path, '[hub.http]\nanswers = "json"\n\n' + echo_server_toml())
    async with http_hub(config, tmp_path) as hub:
        yield hub.mcp_url


@pytest.fixture
async def raw(hub_url: str) -> AsyncIterator[RawSession]:
    async with httpx2.AsyncClient(timeout=30) as client:
        session = RawSession(client, hub_url)
        with anyio.fail_after(30):
            await session.open()
        yield session


async def test_call_is_answered_with_a_plain_json_body(raw: RawSession) -> None:
    with anyio.fail_after(30):
        r = await raw.request("tools/call", {"name": "echo_echo", "arguments": {"text": "hi"}})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.headers["mcp-session-id"] == raw.sid
    body = r.json()
    assert body["id"] == raw._ids, body
    assert "result" in body, body
    assert body["result"]["content"] == [{"type": "text", "text": "hi"}]


async def test_plain_requests_answer_json_and_equal_the_sdk_bytes(raw: RawSession) -> None:
    with anyio.fail_after(30):
        for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
            fast = await raw.request(method)
            raw._ids -= 1  # the same id, so the two answers can be compared byte for byte
            slow = await raw.request(method, lead=b" ")
            assert fast.headers["content-type"] == "application/json", method
            assert slow.headers["content-type"].startswith("text/event-stream"), method
            assert [fast.text] == [d for d in sse_data(slow.text) if '"result"' in d], method
        ping = await raw.request("ping")
    assert ping.headers["content-type"] == "application/json", (ping.status_code, ping.text)
    assert ping.json() == {"jsonrpc": "2.0", "id": raw._ids, "result": {}}


async def test_progress_token_and_unknown_session_take_the_sdk_path(raw: RawSession) -> None:
    with anyio.fail_after(30):
        r = await raw.request("tools/call", {"name": "echo_slow", "arguments": {"seconds": 0.1, "steps": 2},
                                             "_meta": {"progressToken": "p1"}})
        assert r.headers["content-type"].startswith("text/event-stream")
        progress = [json.loads(d) for d in sse_data(r.text) if "notifications/progress" in d]
        assert len(progress) == 2
        raw.sid = "0" * 32
        gone = await raw.request("ping")
    assert gone.status_code == 404


async def test_a_call_that_logs_switches_to_sse(raw: RawSession) -> None:
    with anyio.fail_after(30):
        r = await raw.request("tools/call", {"name": "echo_log", "arguments": {"message": "note"}})
    assert r.headers["content-type"] == "text/event-stream"
    assert sse_data(r.text)[0] == ""  # the priming event (a 2025-11-25 client)
    events = [json.loads(d) for d in sse_data(r.text) if d]
    assert events[0]["method"] == "notifications/message"
    assert events[0]["params"]["data"] == "note"
    assert events[-1]["id"] == raw._ids
    assert events[-1]["result"]["content"][0]["text"] == "logged"


async def test_cancel_of_a_fast_call(raw: RawSession) -> None:
    answers: list[httpx2.Response] = []

    async def call() -> None:
        answers.append(await raw.request("tools/call", {"name": "echo_slow", "arguments": {"seconds": 30}}))

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            while raw._ids < 1:
                await anyio.sleep(0.01)
            rid = raw._ids
            await anyio.sleep(0.3)  # the call is running upstream
            r = await raw.post_raw(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                               "params": {"requestId": rid}}).encode())
            assert r.status_code == 202
    assert answers[0].status_code == 200
    assert '"result"' not in answers[0].text


async def test_sdk_client_sampling_and_elicitation_through_the_fast_path(hub_url: str) -> None:
    async def sampling(ctx: ClientRequestContext, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="42"),
                                         model="m")

    async def elicitation(ctx: ClientRequestContext, params: types.ElicitRequestParams
                          ) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "yes"})

    with anyio.fail_after(40):
        async with http_session(hub_url, sampling_callback=sampling,
                                elicitation_callback=elicitation) as session:
            echoed = await session.call_tool("echo_echo", {"text": "x"})
            sampled = await session.call_tool("echo_sample", {"prompt": "q"})
            elicited = await session.call_tool("echo_elicit", {"message": "ok?"})
            listed = await session.list_tools()
        async with httpx2.AsyncClient() as client:
            served = (await client.get(hub_url.replace("/mcp", "/status.json"))).json()["http_fast_path"]
    assert echoed.content[0].text == "x"  # type: ignore[union-attr]
    assert sampled.content[0].text == "sampled[m]: 42"  # type: ignore[union-attr]
    assert json.loads(elicited.content[0].text)["content"] == {"answer": "yes"}  # type: ignore[union-attr]
    assert any(t.name == "echo_echo" for t in listed.tools)
    assert served["tools/call"] == 3 and served["tools/list"] >= 1  # the SDK client took the fast path
