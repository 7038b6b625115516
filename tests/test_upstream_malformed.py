"""A malformed answer to a request fails that request at once, with one clear log line.

An upstream that answers a known request id with something that is not a valid
response (``"result": 42``, neither result nor error, a result of the wrong
shape) must not leave the caller waiting for the timeout.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio
import mcp.types as types
import pytest
from mcp.shared.message import SessionMessage

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.transports import INVALID_RESPONSE, _AnswerMalformedResponses
from tests.fixtures_upstream import ROOT, running, text_of, toml_str

pytestmark = pytest.mark.anyio

#: The per-call timeout, far beyond every bound here: a call left waiting for it fails
#: the test at its ``fail_after`` instead of ending with a timeout.
TIMEOUT = 600


def hostile_block() -> str:
    return (f"[servers.h]\ncommand = {toml_str(sys.executable)}\n"
            'args = ["-m", "tests.fixtures.hostile_server"]\n'
            f"cwd = {toml_str(str(ROOT))}\ntimeout = {TIMEOUT}\n")


# A raw stdio server whose only tool answers with an object that is not a CallToolResult.
WRONG_SHAPE = r'''
import json, sys
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    rid, method = m.get("id"), m.get("method")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": m["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "shape", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
            {"name": "shape", "inputSchema": {"type": "object"}}]}})
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": 5}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
'''


@pytest.mark.parametrize(("tool", "why"), [
    ("malformed", "the result is not an object"),
    ("no_result", "it has neither a result nor an error"),
])
async def test_a_malformed_response_fails_the_call_at_once(
        tool: str, why: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcp_hub")
    with anyio.fail_after(20):
        async with running(hostile_block()) as (_, registry):
            result = await registry.dispatch(f"h_{tool}", {}, call=CallContext())
            assert result.is_error
            assert text_of(result) == (
                f"Server 'h' did not answer tool '{tool}' with a valid response: "
                f"{INVALID_RESPONSE}: {why}")
            ok = await registry.dispatch("h_ok", {"text": "next"}, call=CallContext())
            assert text_of(ok) == "next"
    about = [r for r in caplog.records if "invalid response" in r.getMessage()]
    assert len(about) == 1
    assert about[0].levelno == logging.WARNING and getattr(about[0], "server", None) == "h"
    assert all("validation error" not in r.getMessage() for r in caplog.records)


async def test_a_result_of_the_wrong_shape_fails_the_call_at_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    script = tmp_path / "wrong_shape.py"
    script.write_text(WRONG_SHAPE)
    body = (f"[servers.s]\ncommand = {toml_str(sys.executable)}\n"
            f"args = [{toml_str(str(script))}]\ntimeout = {TIMEOUT}\n")
    caplog.set_level(logging.DEBUG, logger="mcp_hub")
    with anyio.fail_after(20):
        async with running(body) as (_, registry):
            result = await registry.dispatch("s_shape", {}, call=CallContext())
            assert result.is_error
            text = text_of(result)
            assert text.startswith("Server 's' did not answer tool 'shape' with a valid "
                                   f"response: {INVALID_RESPONSE}: the result is not a valid "
                                   "CallToolResult (content")
            assert "\n" not in text
    about = [r for r in caplog.records if "invalid response" in r.getMessage()]
    assert len(about) == 1 and getattr(about[0], "server", None) == "s"


async def test_over_http_a_malformed_response_becomes_an_error_for_its_request() -> None:
    """The HTTP and SSE transports hand the session a validation error; the hub turns
    one about a response into an error response with the same id."""
    adapter = types.jsonrpc_message_adapter
    errors = []
    for line in (b'{"jsonrpc": "2.0", "id": 7, "result": 42}', b'{"hello": "world"}'):
        try:
            adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            errors.append(exc)
    good = SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=8, result={}))
    send, recv = anyio.create_memory_object_stream[SessionMessage | Exception](4)
    for item in (*errors, good):
        await send.send(item)
    send.close()
    guarded = _AnswerMalformedResponses("web", recv)
    items = [item async for item in guarded]
    assert len(items) == 3
    first = items[0]
    assert isinstance(first, SessionMessage)
    assert isinstance(first.message, types.JSONRPCError) and first.message.id == 7
    assert first.message.error.message == f"{INVALID_RESPONSE}: the result is not an object"
    assert items[1] is errors[1]  # not an answer to a request: passed on as it was
    assert items[2] is good
