"""The listen-stream reader's choices, on answers made up byte for byte.

A ``subscriptions/listen`` answer under ``application/json`` whose first line is a
JSON value is handed on as an event stream, one event per line, a line that is
not JSON skipped; an answer that is one JSON document (on one line, or
pretty-printed over several) passes through as it came. The answer to a
``tools/call`` is read the same way, a line over the limit failing the call; one
document answering it is not limited by the hub. (The whole path, through a hub, is in ``test_eras_ndjson_listen.py``.)
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator

import httpx2
import pytest

from mcp_hub.upstream.sessions.ndjson import ndjson_hook

pytestmark = pytest.mark.anyio

LISTEN = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {}}
CALL = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "x"}}
PRETTY_ERROR = json.dumps({"jsonrpc": "2.0", "id": 7,
                           "error": {"code": -32601, "message": "Method not found"}},
                          indent=2).encode()


class _Chunks(httpx2.AsyncByteStream):
    """A body that arrives in pieces of 5 bytes, as off the network."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), 5):
            yield self.body[start:start + 5]


async def _answer(body: bytes, request: dict[str, object] = LISTEN, *,
                  gzip: bool = False) -> tuple[str, bytes]:
    """The content type and body the SDK would read for ``body`` (sent gzip-encoded)."""
    def upstream(_: httpx2.Request) -> httpx2.Response:
        headers = {"content-type": "application/json"}
        if gzip:
            headers["content-encoding"] = "gzip"
        return httpx2.Response(200, headers=headers,
                               stream=_Chunks(zlib.compress(body, wbits=31) if gzip else body))

    hooks = {"response": [ndjson_hook("nd", 1024)]}
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream),
                                  event_hooks=hooks) as client:
        sent = client.build_request("POST", "http://upstream/mcp", json=request)
        response = await client.send(sent, stream=True)
        try:
            return response.headers["content-type"], await response.aread()
        finally:
            await response.aclose()


async def test_lines_become_events_and_a_line_that_is_not_json_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kind, body = await _answer(b'{"a": 1}\r\nnot json\n\n{"b": 2}')
    assert kind == "text/event-stream"
    assert body == b'data: {"a": 1}\n\ndata: {"b": 2}\n\n'
    assert "[nd] upstream sent a line that is not JSON" in caplog.text


async def test_a_line_over_the_limit_ends_the_stream_with_an_error_for_the_listen() -> None:
    kind, body = await _answer(b'{"a": 1}\n"' + b"x" * 2000 + b'"\n{"b": 2}\n')
    assert kind == "text/event-stream"
    first, second = body.split(b"\n\n")[:2]
    assert first == b'data: {"a": 1}'
    error = json.loads(second.removeprefix(b"data: "))
    assert error["id"] == 7 and "exceeds max_message_bytes" in error["error"]["message"]
    assert b'"b"' not in body


@pytest.mark.parametrize("body", [PRETTY_ERROR, PRETTY_ERROR.replace(b"\n", b"")],
                         ids=["pretty-printed", "one-line"])
async def test_one_json_document_passes_through_as_it_came(body: bytes) -> None:
    assert await _answer(body) == ("application/json", body)


async def test_the_answer_to_a_call_is_read_the_same_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = (b'{"jsonrpc": "2.0", "method": "notifications/progress"}\nnot json\n'
            b'{"jsonrpc": "2.0", "id": 8, "result": {}}\n')
    kind, events = await _answer(body, CALL)
    assert kind == "text/event-stream"
    assert events == (b'data: {"jsonrpc": "2.0", "method": "notifications/progress"}\n\n'
                      b'data: {"jsonrpc": "2.0", "id": 8, "result": {}}\n\n')
    assert "[nd] upstream sent a line that is not JSON on its answer to tools/call" in caplog.text


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
async def test_an_answer_is_read_decoded(gzip: bool) -> None:
    one = b'{"jsonrpc": "2.0", "id": 8, "result": {}}'
    assert await _answer(one, CALL, gzip=gzip) == ("application/json", one)
    kind, events = await _answer(b'{"a": 1}\n' + one, CALL, gzip=gzip)
    assert (kind, events) == ("text/event-stream", b'data: {"a": 1}\n\ndata: ' + one + b"\n\n")


async def test_a_line_over_the_limit_fails_the_call_with_its_id() -> None:
    kind, body = await _answer(b'"' + b"x" * 2000 + b'"\n{"b": 2}\n', CALL)
    error = json.loads(body.removeprefix(b"data: "))
    assert kind == "text/event-stream" and error["id"] == 8
    assert "exceeds max_message_bytes" in error["error"]["message"]


@pytest.mark.parametrize("body", [PRETTY_ERROR, PRETTY_ERROR.replace(b"\n", b""),
                                  b"\n\n" + b'"' + b"x" * 2000 + b'"'],
                         ids=["pretty-printed", "one-line", "one-line-over-the-limit"])
async def test_one_document_answering_a_call_passes_through_as_it_came(body: bytes) -> None:
    assert await _answer(body, CALL) == ("application/json", body)
