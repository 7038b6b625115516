"""The lean ``tools/call`` (mcp_hub/upstream/lean_call.py): taken for a plain call on a
live stdio or Streamable HTTP session, with progress, cancellation, crashes and bad
answers handled as on the SDK's path; the SDK's path for everything else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.shared.inbound import MCP_NAME_HEADER, encode_header_value
from mcp.shared.message import SessionMessage

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import lean_call
from mcp_hub.upstream.stdio.reader import plain_response
from tests.fixtures_upstream import (
    ProgressSeen,
    echo_block,
    free_port,
    http_upstream,
    kill_mid_call,
    running,
    script_block,
    text_of,
)

pytestmark = pytest.mark.anyio


class Paths:
    """Counts of the calls that took each path."""

    def __init__(self) -> None:
        self.lean = 0
        self.sdk = 0


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[Paths]:
    seen = Paths()
    exchange, rounds = lean_call._exchange, lean_call.send_resolving_rounds

    async def counted_exchange(*args: Any, **kwargs: Any) -> Any:
        seen.lean += 1
        return await exchange(*args, **kwargs)

    async def counted_rounds(*args: Any, **kwargs: Any) -> Any:
        seen.sdk += 1
        return await rounds(*args, **kwargs)

    monkeypatch.setattr(lean_call, "_exchange", counted_exchange)
    monkeypatch.setattr(lean_call, "send_resolving_rounds", counted_rounds)
    yield seen


async def test_a_plain_call_over_stdio_takes_the_lean_path(paths: Paths) -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, registry):
            results = []

            async def one(i: int) -> None:
                results.append(await registry.dispatch("echo", {"text": f"t{i}"},
                                                       call=CallContext()))

            async with anyio.create_task_group() as tg:
                for i in range(20):  # concurrent calls share the session, ids never mix
                    tg.start_soon(one, i)
            assert sorted(text_of(r) for r in results) == sorted(f"t{i}" for i in range(20))
            failed = await registry.dispatch("echo_fail", {"message": "no"}, call=CallContext())
            assert failed.is_error and text_of(failed) == "no"
            conn = manager.connection("echo")
            assert conn is not None
            unknown = await conn.call_tool("nope", {}, CallContext())
            assert unknown.is_error and text_of(unknown) == "Unknown tool: nope"
            assert conn.status().in_flight == 0
    assert paths.lean == 22 and paths.sdk == 0


async def test_progress_on_the_lean_path_reaches_the_caller_and_resets_the_timeout(
        paths: Paths) -> None:
    # timeout 1 s, a call of ~2 s reporting every 0.1 s: only progress keeps it alive.
    with anyio.fail_after(30):
        async with running(echo_block(extra="timeout = 1")) as (_, registry):
            call = ProgressSeen()
            result = await registry.dispatch("echo_slow", {"seconds": 2, "steps": 20},
                                             call=call)
            assert not result.is_error, text_of(result)
            assert len(call.reports) >= 10
    assert paths.lean == 1 and paths.sdk == 0


async def test_a_timeout_on_the_lean_path_cancels_upstream(paths: Paths,
                                                           tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    body = script_block("probe", "probe_server.py",
                        extra=f'timeout = 0.5\nenv = {{ PROBE_MARKER = "{marker}" }}')
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            result = await registry.dispatch("probe_wait", {}, call=CallContext())
            assert result.is_error and "within 0.5 s (timeout)" in text_of(result)
            while not marker.exists():  # no event crosses the process boundary: ask again
                await registry.dispatch("probe_roots", {}, call=CallContext())
            assert marker.read_text() == "cancelled\n"
            conn = manager.connection("probe")
            assert conn is not None and conn.status().in_flight == 0
    assert paths.lean >= 2 and paths.sdk == 0


async def test_a_child_that_dies_mid_call_fails_the_lean_call_at_once(paths: Paths) -> None:
    with anyio.fail_after(60):
        async with running(echo_block()) as (manager, registry):
            result, _ = await kill_mid_call(manager, registry, within=2)
            assert result.is_error
            assert "Server 'echo' connection was lost" in text_of(result)
    assert paths.lean == 1 and paths.sdk == 0


async def test_a_plain_call_over_streamable_http_takes_the_lean_path(paths: Paths) -> None:
    port = free_port()
    # The lean path serves handshake-era sessions (a 2026-07-28 session takes the SDK's).
    block = (f'[servers.net]\nurl = "http://127.0.0.1:{port}/mcp"\ntransport = "http"\n'
             'protocol = "2025"\n')
    with anyio.fail_after(60):
        async with http_upstream("http", port), running(block) as (_, registry):
            result = await registry.dispatch("net_add", {"a": 1, "b": 2}, call=CallContext())
            assert result.structured_content == {"sum": 3}
            call = ProgressSeen()
            slow = await registry.dispatch("net_slow", {"seconds": 0.3, "steps": 3}, call=call)
            assert not slow.is_error and call.reports
            sampled = await registry.dispatch("net_sample", {"prompt": "hi"}, call=Sampler())
            assert text_of(sampled) == "sampled[m]: from the client"
    assert paths.lean == 3 and paths.sdk == 0


class Sampler(CallContext):
    def __init__(self) -> None:
        super().__init__(client_capabilities=types.ClientCapabilities(
            sampling=types.SamplingCapability()))

    async def create_message(self, params: types.CreateMessageRequestParams
                             ) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="from the client"), model="m")


async def test_a_call_with_other_params_or_another_request_takes_the_sdk_path(
        paths: Paths) -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, _):
            conn = manager.connection("echo")
            assert conn is not None
            session = conn.session
            assert session is not None
            assert lean_call.lean_dispatcher(session) is not None
            plain = types.CallToolRequest(params=types.CallToolRequestParams(
                name="echo", arguments={"text": "a"}))
            result = await conn.request(plain, types.CallToolResult, what="a call")
            assert text_of(result) == "a"
            assert (paths.lean, paths.sdk) == (1, 0)
            # A field the lean path does not write itself: the SDK writes the request.
            other = types.CallToolRequest(params=types.CallToolRequestParams(
                name="echo", arguments={"text": "b"}, request_state="opaque"))
            result = await conn.request(other, types.CallToolResult, what="a call")
            assert text_of(result) == "b"
            assert (paths.lean, paths.sdk) == (1, 1)
            await conn.request(types.PingRequest(), types.EmptyResult, what="ping")
            assert (paths.lean, paths.sdk) == (1, 2)


class _ForeignSession:
    """A session whose dispatcher is not the SDK's JSON-RPC one, or a 2026-07-28 one."""

    def __init__(self, version: str | None, dispatcher: Any) -> None:
        self.protocol_version = version
        self._dispatcher = dispatcher
        self._stamp = lambda data, opts: None


async def test_an_unknown_dispatcher_or_a_modern_session_is_left_to_the_sdk() -> None:
    foreign: Any = _ForeignSession("2025-06-18", object())
    assert lean_call.lean_dispatcher(foreign) is None
    async with running(echo_block()) as (manager, _):
        conn = manager.connection("echo")
        assert conn is not None and conn.session is not None
        real = conn.session._dispatcher
        modern: Any = _ForeignSession("2026-07-28", real)
        assert lean_call.lean_dispatcher(modern) is None
        assert lean_call.lean_dispatcher(_ForeignSession("2025-06-18", real)) is real  # type: ignore[arg-type]
        assert isinstance(conn.session, ClientSession)


def test_plain_response_takes_only_exact_result_answers() -> None:
    good = plain_response(b'{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}')
    assert isinstance(good, SessionMessage)
    assert isinstance(good.message, types.JSONRPCResponse)
    assert good.message.id == 7 and good.message.result == {"content": []}
    named = plain_response(b'{"id": "a", "result": {}, "jsonrpc": "2.0"}')
    assert named is not None and named.message.id == "a"
    for line in (
        b'{"jsonrpc": "2.0", "id": 7, "result": 42}',                # not an object
        b'{"jsonrpc": "2.0", "id": true, "result": {}}',             # not an id
        b'{"jsonrpc": "2.0", "id": 1.5, "result": {}}',
        b'{"jsonrpc": "1.0", "id": 7, "result": {}}',
        b'{"jsonrpc": "2.0", "id": 7, "result": {}, "error": {}}',   # both
        b'{"jsonrpc": "2.0", "id": 7, "method": "ping"}',            # a request
        b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}',
        b"not json", b"[1, 2, 3]",
    ):
        assert plain_response(line) is None, line


async def test_toward_http_the_request_carries_the_headers_the_sdk_would_stamp() -> None:
    to_transport, from_hub = anyio.create_memory_object_stream[SessionMessage](1)
    to_session, session_reads = anyio.create_memory_object_stream[Any](1)
    async with to_transport, from_hub, to_session, session_reads:
        session = ClientSession(session_reads, to_transport)
        dispatcher: Any = session._dispatcher
        params = {"name": "naïve tool", "arguments": {"a": 1}, "_meta": {"progressToken": 9}}
        await lean_call._write(session, dispatcher, 9, params)
        sent = from_hub.receive_nowait()
    message = sent.message
    assert isinstance(message, types.JSONRPCRequest)
    assert (message.id, message.method, message.params) == (9, "tools/call", params)
    assert sent.metadata is not None
    headers = sent.metadata.headers  # type: ignore[union-attr]
    assert headers == {MCP_NAME_HEADER: encode_header_value("naïve tool")}  # before a handshake
