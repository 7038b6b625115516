"""The hub's direct OTLP encoding decodes, with ``opentelemetry-proto``, to the spans it recorded."""

from __future__ import annotations

import os
from typing import Any

import pytest

from mcp_hub.telemetry.otlp_wire import encode_request
from mcp_hub.telemetry.record import CLIENT, INTERNAL, SERVER, Sampler, SpanRecord, parse_traceparent

try:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb
except ImportError as exc:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"needs the otel extra (pip install -e '.[dev]'): {exc}", allow_module_level=True)


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value"))


def _records() -> list[SpanRecord]:
    sampler = Sampler(1.0)
    parent = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v")
    out = []
    for i in range(3):  # the same kind of span three times: the shared part comes from the cache
        server = SpanRecord.root("tools/call echo", SERVER,
                                 {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
                                  "jsonrpc.request.id": str(i), "mcp.flag": True, "mcp.n": 3,
                                  "mcp.ratio": 0.5}, parent, sampler)
        client = server.child("tools/call echo", CLIENT, {"mcp.method.name": "tools/call",
                                                          "mcp_hub.upstream.name": "up"})
        client.event("progress", {"mcp.progress": 0.5 + i, "mcp.progress.total": 10.0})
        client.link(server)
        for rec in (server, client):
            rec.finish()
        out += [server, client]
    new = SpanRecord.root("hook pre", INTERNAL, {"mcp_hub.hook": "pre", "odd": ["a", 1]}, None,
                          sampler)
    new.error, new.message = "tool_error", "Boom"
    new.attrs["error.type"] = "tool_error"
    new.finish()
    return [*out, new]


def test_every_field_decodes_as_recorded() -> None:
    records = _records()
    data = encode_request(records, {"service.name": "hub"}, "mcp_hub", "1.0")
    assert data == encode_request(records, {"service.name": "hub"}, "mcp_hub", "1.0")
    request = trace_pb.ExportTraceServiceRequest()
    request.ParseFromString(data)
    (rs,) = request.resource_spans
    assert {a.key: _value(a.value) for a in rs.resource.attributes} == {"service.name": "hub"}
    (ss,) = rs.scope_spans
    assert (ss.scope.name, ss.scope.version) == ("mcp_hub", "1.0")
    assert len(ss.spans) == len(records)
    for rec, span in zip(records, ss.spans, strict=True):
        assert int.from_bytes(span.trace_id, "big") == rec.trace_id
        assert int.from_bytes(span.span_id, "big") == rec.span_id
        assert int.from_bytes(span.parent_span_id, "big") == rec.parent_id
        assert span.trace_state == (rec.tracestate or "")
        assert (span.name, span.kind) == (rec.name, rec.kind + 1)
        assert (span.start_time_unix_nano, span.end_time_unix_nano) == (rec.start, rec.end)
        expected = {k: (str(v) if isinstance(v, list) else v) for k, v in rec.attrs.items()}
        assert {a.key: _value(a.value) for a in span.attributes} == expected
        assert [(e.name, e.time_unix_nano, {a.key: _value(a.value) for a in e.attributes})
                for e in span.events] == list(rec.events or [])
        assert [(int.from_bytes(lk.trace_id, "big"), int.from_bytes(lk.span_id, "big"))
                for lk in span.links] == list(rec.links or [])
        assert span.status.code == (2 if rec.error else 0)
        assert span.status.message == (rec.message or "")
        assert span.flags == (0x301 if rec.remote_parent else 0x101)
