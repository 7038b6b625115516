"""Telemetry end to end: a client call through the hub to a real upstream, traced into a
real OTLP/HTTP receiver (tests/otlp_receiver.py) on every downstream path.

The client sends a W3C ``traceparent`` in the request's ``_meta``. The receiver must get
the hub's SERVER span and its CLIENT span to the upstream in that trace, and the upstream
(tests/fixtures/trace_server.py) must see the hub's client span in its own ``_meta``.
"""

from __future__ import annotations

import json
import logging
import secrets
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import TextContent

from bench.common import free_port
from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, http_session, stdio_hub, write_config
from tests.telemetry_parts import (
    CLIENT,
    SERVER,
    Received,
    Span,
    fast_export,
    otlp_receiver,
    telemetry_toml,
    trace_server_toml,
)

pytestmark = pytest.mark.anyio

SECRET_ARG = "arg-value-that-must-not-be-exported"


def _traceparent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


@pytest.fixture(autouse=True)
def _fast_export(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_export(monkeypatch)


def _seen(result: Any) -> dict[str, Any]:
    first = result.content[0]
    assert isinstance(first, TextContent), result
    data: dict[str, Any] = json.loads(first.text)
    return data


async def _one_trace(received: Received, trace_id: str, server_name: str,
                     upstream_tool: str = "trace_seen") -> tuple[Span, Span]:
    """Wait for the hub's server and client spans of ``trace_id``; check their shape."""
    def both() -> bool:
        names = {(s.kind, s.name) for s in received.spans_of(trace_id)}
        return {(SERVER, server_name), (CLIENT, f"tools/call {upstream_tool}")} <= names

    await received.wait_for(both)
    spans = received.spans_of(trace_id)
    # (over HTTP the header's trace also holds the session's other requests: initialize, …)
    server = next(s for s in spans if s.kind == SERVER and s.name == server_name)
    client = next(s for s in spans if s.kind == CLIENT and s.name.endswith(upstream_tool))
    assert client.parent_span_id == server.span_id
    assert server.service == "mcp-hub"
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == server_name.split(" ", 1)[1]
    assert server.attributes["jsonrpc.request.id"]
    assert server.attributes["mcp.protocol.version"]
    assert client.attributes["mcp_hub.upstream.name"] == "trace"
    assert client.attributes["gen_ai.tool.name"] == upstream_tool
    for span in spans:
        assert all(SECRET_ARG not in str(v) for v in span.attributes.values()), span
    return server, client


async def test_stdio_path_one_trace_from_client_to_upstream(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        config = write_config(tmp_path, trace_server_toml() + telemetry_toml(endpoint))
        traceparent, trace_id, parent_id = _traceparent()
        with anyio.fail_after(60):
            async with stdio_hub(config) as session:
                result = await session.call_tool("trace_seen", {"note": SECRET_ARG},
                                                 meta={"traceparent": traceparent})
                seen = _seen(result)
                server, client = await _one_trace(received, trace_id, "tools/call trace_seen")
        assert server.parent_span_id == parent_id
        assert server.attributes["network.transport"] == "pipe"
        # The upstream got the hub's client span as its parent, in _meta.
        assert seen["meta"] == f"00-{trace_id}-{client.span_id}-01"
        assert seen["header"] is None


@asynccontextmanager
async def _http_upstream() -> AsyncIterator[str]:
    """The trace fixture as a Streamable HTTP server; yields its /mcp URL."""
    import httpx2

    port = free_port()
    proc = subprocess.Popen([PY, "-m", "tests.fixtures.trace_server", "--transport", "http",
                             "--port", str(port)], cwd=str(ROOT), stdin=subprocess.DEVNULL)
    try:
        with anyio.fail_after(30):
            async with httpx2.AsyncClient() as client:
                while True:
                    try:
                        await client.get(f"http://127.0.0.1:{port}/mcp")
                        break
                    except httpx2.TransportError:
                        assert proc.poll() is None, "the trace fixture exited"
                        await anyio.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_http_path_context_from_meta_or_headers_out_in_meta_and_headers(
        tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        async with _http_upstream() as url:
            body = f'[servers.trace]\nurl = "{url}"\nprefix = ""\n' + telemetry_toml(endpoint)
            config = write_config(tmp_path, body)
            tp_meta, trace_meta, parent_meta = _traceparent()
            tp_header, trace_header, parent_header = _traceparent()
            with anyio.fail_after(60):
                async with http_hub(config, tmp_path) as hub:
                    async with http_session(hub.mcp_url, headers={"traceparent": tp_header}) as s:
                        by_meta = _seen(await s.call_tool("trace_seen", {"note": SECRET_ARG},
                                                          meta={"traceparent": tp_meta}))
                        by_header = _seen(await s.call_tool("trace_seen", {}))
                    server, client = await _one_trace(received, trace_meta, "tools/call trace_seen")
                    server2, client2 = await _one_trace(received, trace_header,
                                                        "tools/call trace_seen")
    # _meta wins over the header; without _meta the header is the parent.
    assert server.parent_span_id == parent_meta
    assert server2.parent_span_id == parent_header
    assert server.attributes["network.transport"] == "tcp"
    assert server.attributes["mcp.session.id"]
    # Out: in the upstream request's _meta and in its HTTP headers.
    assert by_meta["meta"] == f"00-{trace_meta}-{client.span_id}-01"
    assert by_meta["header"] == by_meta["meta"]
    assert by_header["meta"] == f"00-{trace_header}-{client2.span_id}-01"


async def test_http_path_off_passes_the_context_from_meta_or_headers(tmp_path: Path) -> None:
    """Telemetry off, over Streamable HTTP: the client's context reaches the upstream's
    ``_meta`` as it came, from ``_meta`` first and from the HTTP headers otherwise."""
    config = write_config(tmp_path, trace_server_toml())
    tp_meta, _, _ = _traceparent()
    tp_header, _, _ = _traceparent()
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub:
            async with http_session(hub.mcp_url, headers={"traceparent": tp_header}) as s:
                by_meta = _seen(await s.call_tool("trace_seen", {}, meta={"traceparent": tp_meta}))
                by_header = _seen(await s.call_tool("trace_seen", {}))
            async with http_session(hub.mcp_url) as s:
                neither = _seen(await s.call_tool("trace_seen", {}))
    assert by_meta["meta"] == tp_meta
    assert by_header["meta"] == tp_header
    assert neither["meta"] is None


async def test_bridge_tool_call_is_one_trace(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        body = trace_server_toml() + '\n[tool_search]\nmode = "on"\n' + telemetry_toml(endpoint)
        config = write_config(tmp_path, body)
        traceparent, trace_id, parent_id = _traceparent()
        with anyio.fail_after(60):
            async with stdio_hub(config) as session:
                names = {t.name for t in (await session.list_tools()).tools}
                assert "tool_call" in names and "trace_seen" not in names
                result = await session.call_tool(
                    "tool_call", {"name": "trace_seen", "arguments": {"note": SECRET_ARG}},
                    meta={"traceparent": traceparent})
                seen = _seen(result)
                server, client = await _one_trace(received, trace_id, "tools/call tool_call")
                # The duration histograms arrive too, with bounded labels.
                await received.wait_for(lambda: {"mcp.server.operation.duration",
                                                 "mcp.client.operation.duration"}
                                        <= received.metrics.keys())
        assert server.parent_span_id == parent_id
        assert seen["meta"] == f"00-{trace_id}-{client.span_id}-01"
        points = received.metrics["mcp.server.operation.duration"]
        assert {p.get("gen_ai.tool.name") for p in points
                if p["mcp.method.name"] == "tools/call"} == {"tool_call"}
        # Other requests are measured too, without a tool label.
        assert {p["mcp.method.name"] for p in points} >= {"initialize", "tools/list", "tools/call"}
        assert all("gen_ai.tool.name" not in p for p in points if p["mcp.method.name"] != "tools/call")


async def test_relays_are_children_of_the_call_span_and_link_to_it(tmp_path: Path) -> None:
    from mcp.types import CreateMessageResult

    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(text="sampled"),
                                   model="test-model")

    with otlp_receiver() as (endpoint, received):
        config = write_config(tmp_path, echo_server_toml("echo") + telemetry_toml(endpoint))
        tp_sample, trace_sample, _ = _traceparent()
        tp_slow, trace_slow, _ = _traceparent()
        with anyio.fail_after(60):
            async with stdio_hub(config, sampling_callback=sampling) as session:
                result = await session.call_tool("echo_sample", {"prompt": SECRET_ARG},
                                                 meta={"traceparent": tp_sample})
                assert not result.is_error, result
                progress: list[float] = []

                async def on_progress(p: float, total: float | None, message: str | None) -> None:
                    progress.append(p)

                await session.call_tool("echo_slow", {"seconds": 0.2, "steps": 2},
                                        meta={"traceparent": tp_slow},
                                        progress_callback=on_progress)
                await received.wait_for(lambda: any(
                    s.name == "sampling/createMessage" for s in received.spans_of(trace_sample)))
                await received.wait_for(lambda: any(
                    s.kind == SERVER for s in received.spans_of(trace_slow)))
                await received.wait_for(lambda: len([
                    s for s in received.spans_of(trace_slow)
                    if s.name == "notifications/progress"]) >= len(progress))
        spans = received.spans_of(trace_sample)
        call = next(s for s in spans if s.kind == SERVER)
        relay = next(s for s in spans if s.name == "sampling/createMessage")
        assert relay.parent_span_id == call.span_id and relay.kind == CLIENT
        # The relay links to the call's span: its trace id and span id.
        assert relay.links == [(trace_sample, call.span_id)]
        slow = next(s for s in received.spans_of(trace_slow) if s.kind == SERVER)
        assert progress and slow.events.count("progress") == len(progress)
        relayed = [s for s in received.spans_of(trace_slow) if s.name == "notifications/progress"]
        assert len(relayed) == len(progress)
        assert all(s.links == [(trace_slow, slow.span_id)] for s in relayed)


async def test_unknown_tool_is_an_error_span_and_an_other_label(tmp_path: Path) -> None:
    # With a prefix, a made-up name belongs to no server (an unprefixed one would be
    # asked for it: docs/upstreams.md, "Unlisted tools").
    prefixed = trace_server_toml().replace('prefix = ""\n', 'prefix = "trace"\n')
    with otlp_receiver() as (endpoint, received):
        config = load_config(write_config(tmp_path, prefixed + telemetry_toml(endpoint)))
        traceparent, trace_id, _ = _traceparent()
        with anyio.fail_after(60):
            async with Hub(config, load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                call = CallContext(tool_name="x", request_id=7, meta={"traceparent": traceparent})
                with pytest.raises(Exception, match="Unknown tool"):
                    await hub.call_tool("no-such-tool-" + secrets.token_hex(4), {}, call)
                await received.wait_for(lambda: bool(received.spans_of(trace_id)))
                await received.wait_for(
                    lambda: "mcp.server.operation.duration" in received.metrics)
        span = received.spans_of(trace_id)[0]
        assert span.status_code == 2  # ERROR
        assert span.attributes["error.type"] == "-32602"
        labels = received.metrics["mcp.server.operation.duration"]
        assert {p["gen_ai.tool.name"] for p in labels} == {"_OTHER"}


async def test_pipeline_hooks_get_child_spans(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        config = load_config(write_config(tmp_path, trace_server_toml() + telemetry_toml(endpoint)))
        traceparent, trace_id, _ = _traceparent()
        seen_trace: list[Any] = []

        async def pre(**kw: Any) -> None:
            seen_trace.append(kw["call"].trace)

        with anyio.fail_after(60):
            async with Hub(config, load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                hub.hooks.register_hook("pre_tool_call", pre)
                hub.hooks.register_hook("post_tool_call", lambda **kw: None)
                await hub.call_tool("trace_seen", {}, CallContext(
                    request_id=1, meta={"traceparent": traceparent}))
                await received.wait_for(lambda: len(received.spans_of(trace_id)) == 4)
        spans = {s.name: s for s in received.spans_of(trace_id)}
        server = spans["tools/call trace_seen"]
        assert server.kind == SERVER and seen_trace and seen_trace[0] is not None
        for hook in ("pre_tool_call", "post_tool_call"):
            assert spans[f"hook {hook}"].parent_span_id == server.span_id
            assert spans[f"hook {hook}"].attributes["mcp_hub.hook"] == hook


async def test_sampling_follows_the_caller_and_off_passes_the_context_on(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        body = trace_server_toml() + telemetry_toml(endpoint) + "sample_ratio = 0.0\n"
        config = load_config(write_config(tmp_path, body))
        traceparent, trace_id, _ = _traceparent()
        with anyio.fail_after(60):
            async with Hub(config, load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                # A new trace at ratio 0 is not recorded; a caller's sampled trace is.
                await hub.call_tool("trace_seen", {}, CallContext(request_id=1))
                await hub.call_tool("trace_seen", {}, CallContext(
                    request_id=2, meta={"traceparent": traceparent}))
                await received.wait_for(lambda: len(received.spans_of(trace_id)) == 2)
        assert {s.trace_id for s in received.spans} == {trace_id}
    off = load_config(write_config(tmp_path, trace_server_toml()))
    with anyio.fail_after(60):
        async with Hub(off, load_plugin_modules=False) as hub:
            await hub.wait_ready(20)
            call = CallContext(request_id=3, meta={"traceparent": traceparent})
            assert not hub.telemetry.enabled
            result = await hub.call_tool("trace_seen", {}, call)
            assert call.trace is None
            # Off, the hub records nothing and passes the caller's context on unchanged ...
            assert _seen(result)["meta"] == traceparent
            # ... but not a malformed one, and nothing when the caller sent none.
            bad = CallContext(request_id=4, meta={"traceparent": "00-not-a-trace-context"})
            assert _seen(await hub.call_tool("trace_seen", {}, bad))["meta"] is None
            assert _seen(await hub.call_tool("trace_seen", {}, CallContext(request_id=5)))["meta"] is None


async def test_an_unreachable_collector_is_logged_once_and_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    # Bound and never listening: connections are refused for the whole test, and no other
    # process can take the port meanwhile.
    reserved = socket.socket()
    reserved.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{reserved.getsockname()[1]}"
    config = load_config(write_config(tmp_path, trace_server_toml() + telemetry_toml(dead)))
    caplog.set_level(logging.INFO, logger="mcp_hub.telemetry")
    with reserved, anyio.fail_after(90):
        async with Hub(config, load_plugin_modules=False) as hub:
            await hub.wait_ready(20)
            health = hub.telemetry.providers.health  # type: ignore[union-attr]
            spans = hub.telemetry.providers.span_queue  # type: ignore[union-attr]
            for i in range(300):
                result = await hub.call_tool("trace_seen", {}, CallContext(request_id=i))
                assert not result.is_error
            assert len(spans.queue) <= 64
            await _wait(lambda: health.failures >= 3)
    warnings = [r for r in caplog.records if "cannot export" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "127.0.0.1" in warnings[0].getMessage()


async def _wait(predicate: Any, timeout: float = 30.0) -> None:  # noqa: ASYNC109
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.05)


def test_off_unless_an_endpoint_is_named() -> None:
    from mcp_hub.telemetry import TelemetryConfig, resolve

    assert resolve(TelemetryConfig(), {}) is None
    assert resolve(TelemetryConfig(otlp_endpoint="http://c:4318"), {"OTEL_SDK_DISABLED": "true"}) is None
    assert resolve(TelemetryConfig(enabled=False), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) is None
    on = resolve(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:p@c:4318/",
                                     "OTEL_SERVICE_NAME": "gw", "OTEL_TRACES_SAMPLER_ARG": "0.25"})
    assert on is not None
    assert on.traces_endpoint is None  # the exporter resolves the variable itself
    assert (on.service_name, on.sample_ratio) == ("gw", 0.25)
    assert on.label == "http://c:4318/v1/traces"  # no credentials in the log line
    cfg = resolve(TelemetryConfig(otlp_endpoint="http://c:4318", sample_ratio=0.5),
                  {"OTEL_TRACES_SAMPLER_ARG": "0.1"})
    assert cfg is not None
    assert (cfg.traces_endpoint, cfg.metrics_endpoint, cfg.sample_ratio) == (
        "http://c:4318/v1/traces", "http://c:4318/v1/metrics", 0.5)


def test_log_records_carry_the_active_span() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    from mcp_hub.telemetry.logs import TraceFormatter, TraceLogFilter

    tracer = TracerProvider().get_tracer("t")
    record = logging.LogRecord("mcp_hub", logging.INFO, __file__, 1, "hello", None, None)
    TraceLogFilter().filter(record)
    assert not hasattr(record, "trace_id")
    with tracer.start_as_current_span("s") as span:
        ctx = span.get_span_context()
        record = logging.LogRecord("mcp_hub", logging.INFO, __file__, 1, "hello", None, None)
        TraceLogFilter().filter(record)
    line = TraceFormatter("%(message)s").format(record)
    assert line == f"hello trace_id={ctx.trace_id:032x} span_id={ctx.span_id:016x}"
    assert trace.get_current_span().get_span_context().is_valid is False


def test_queued_durations_stay_bounded_and_are_never_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_hub.telemetry import spans

    monkeypatch.setattr(spans, "MAX_QUEUED_DURATIONS", 10)

    class Histogram:
        def __init__(self) -> None:
            self.records: list[tuple[float, dict[str, str]]] = []

        def record(self, value: float, attributes: dict[str, str]) -> None:
            self.records.append((value, attributes))

    tel = spans.Telemetry(sampler=None, meter=None, known_tool=lambda n: True, spans=[])
    histogram = Histogram()
    for i in range(25):
        tel.observe(histogram, float(i), tel.labels(("echo",), lambda: {"gen_ai.tool.name": "echo"}))
    assert len(tel.durations) == 10 and len(histogram.records) == 15
    tel.drain()
    assert not tel.durations and len(histogram.records) == 25
    # One attribute dict per label set, shared by every queued duration.
    assert len({id(a) for _, a in histogram.records}) == 1


async def _lists_and_a_read(session: Any, tp: str) -> None:
    from mcp.types import PaginatedRequestParams

    await session.list_tools(params=PaginatedRequestParams(_meta={"traceparent": tp}))
    await session.list_prompts(params=PaginatedRequestParams(_meta={"traceparent": tp}))
    read = await session.read_resource("echo://hello", meta={"traceparent": tp})
    assert read.contents[0].text == "hello"


async def _request_spans(received: Received, trace_id: str) -> dict[str, Span]:
    names = {"tools/list", "prompts/list", "resources/read echo://hello"}
    await received.wait_for(lambda: names <= {s.name for s in received.spans_of(trace_id)
                                              if s.kind == SERVER})
    await received.wait_for(lambda: any(s.kind == CLIENT for s in received.spans_of(trace_id)))
    spans = {s.name: s for s in received.spans_of(trace_id) if s.kind == SERVER}
    for name in names:
        assert spans[name].attributes["mcp.method.name"] == name.split(" ")[0]
        assert spans[name].attributes["jsonrpc.request.id"]
        assert spans[name].attributes["mcp.protocol.version"]
    read = spans["resources/read echo://hello"]
    assert read.attributes["mcp.resource.uri"] == "echo://hello"
    # The upstream request of the read is the read's CLIENT child.
    client = next(s for s in received.spans_of(trace_id) if s.kind == CLIENT)
    assert client.name == "resources/read echo://hello"
    assert client.parent_span_id == read.span_id
    assert client.attributes["mcp_hub.upstream.name"] == "echo"
    return spans


async def test_every_request_has_a_server_span_stdio(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        config = write_config(tmp_path, echo_server_toml("echo") + telemetry_toml(endpoint))
        tp, trace_id, parent_id = _traceparent()
        with anyio.fail_after(60):
            async with stdio_hub(config) as session:
                await _lists_and_a_read(session, tp)
                spans = await _request_spans(received, trace_id)
    assert all(s.parent_span_id == parent_id for s in spans.values())
    assert spans["tools/list"].attributes["network.transport"] == "pipe"


async def test_every_request_has_a_server_span_http(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        config = write_config(tmp_path, echo_server_toml("echo") + telemetry_toml(endpoint))
        tp, trace_id, parent_id = _traceparent()
        with anyio.fail_after(60):
            async with http_hub(config, tmp_path) as hub:
                async with http_session(hub.mcp_url) as session:
                    await _lists_and_a_read(session, tp)
                spans = await _request_spans(received, trace_id)
    assert all(s.parent_span_id == parent_id for s in spans.values())
    assert spans["tools/list"].attributes["network.transport"] == "tcp"
    assert spans["tools/list"].attributes["mcp.session.id"]


async def test_a_reload_applies_telemetry_changes(tmp_path: Path) -> None:
    with otlp_receiver() as (endpoint, received):
        path = write_config(tmp_path, trace_server_toml())
        traceparent, trace_id, _ = _traceparent()
        with anyio.fail_after(60):
            async with Hub(load_config(path), load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                assert not hub.telemetry.enabled
                # Only [telemetry] changes (the [hub] table stays as it was: a changed
                # naming key would restart the servers).
                original = path.read_text()
                path.write_text(original + telemetry_toml(endpoint))
                assert await hub.reload()
                assert hub.telemetry.enabled
                seen = _seen(await hub.call_tool("trace_seen", {}, CallContext(
                    request_id=1, meta={"traceparent": traceparent})))
                await received.wait_for(lambda: len(received.spans_of(trace_id)) == 2)
                assert seen["meta"] is not None and trace_id in seen["meta"]
                path.write_text(original)
                assert await hub.reload()
                assert not hub.telemetry.enabled
                call = CallContext(request_id=2, meta={"traceparent": traceparent})
                # Off again: no span of the hub's, the caller's context passed on as it came.
                assert _seen(await hub.call_tool("trace_seen", {}, call))["meta"] == traceparent
                assert call.trace is None
