"""A real OTLP/HTTP receiver: protobuf decoded with ``opentelemetry-proto``.

It listens on an ephemeral loopback port, accepts ``POST /v1/traces`` and
``POST /v1/metrics`` (binary protobuf, as the OTLP/HTTP exporter sends them),
decodes each request with the collector's own message types and keeps the
spans and metric names it saw. Waiting for data is bounded by the caller.

The one OTLP receiver of the repository: the tests decode what they receive,
the benchmarks (bench/telemetry_bench.py) only count requests and bytes
(``decode=False``), so the receiving end costs the measured process nothing
but reading the bodies.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb


@dataclass
class Span:
    """One received span, flattened for assertions."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    attributes: dict[str, Any]
    status_code: int
    service: str
    events: list[str] = field(default_factory=list)
    #: (trace id, span id) of each span link, hex
    links: list[tuple[str, str]] = field(default_factory=list)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


@dataclass
class Received:
    spans: list[Span] = field(default_factory=list)
    #: metric name → list of data points' attribute dicts
    metrics: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Histogram points by metric name: (attributes, count, bucket counts), in arrival order.
    histograms: dict[str, list[tuple[dict[str, Any], int, list[int]]]] = field(default_factory=dict)
    requests: int = 0
    #: Requests and bytes by path (``/v1/traces``, ``/v1/traces bytes``, …).
    counts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, path: str, size: int) -> None:
        with self.lock:
            self.counts[path] = self.counts.get(path, 0) + 1
            self.counts[f"{path} bytes"] = self.counts.get(f"{path} bytes", 0) + size

    def add_traces(self, body: bytes) -> None:
        request = trace_pb.ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.requests += 1
            for rs in request.resource_spans:
                res = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append(Span(
                            name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(),
                            parent_span_id=s.parent_span_id.hex(), kind=s.kind,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            status_code=s.status.code, service=str(res.get("service.name")),
                            events=[e.name for e in s.events],
                            links=[(lk.trace_id.hex(), lk.span_id.hex()) for lk in s.links]))

    def add_metrics(self, body: bytes) -> None:
        request = metrics_pb.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            self.requests += 1
            for rm in request.resource_metrics:
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        points = m.histogram.data_points if m.HasField("histogram") else []
                        self.metrics.setdefault(m.name, []).extend(
                            {a.key: _value(a.value) for a in p.attributes} for p in points)
                        self.histograms.setdefault(m.name, []).extend(
                            ({a.key: _value(a.value) for a in p.attributes}, p.count,
                             list(p.bucket_counts)) for p in points)

    def spans_of(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 20.0) -> None:  # noqa: ASYNC109
        """Wait (bounded) until ``predicate()`` holds."""
        with anyio.fail_after(timeout):
            while not predicate():
                await anyio.sleep(0.05)


@contextmanager
def otlp_receiver(decode: bool = True) -> Iterator[tuple[str, Received]]:
    """Yields ``(base_url, received)`` for a receiver on 127.0.0.1:<ephemeral>;
    ``decode=False`` only counts (``received.counts``)."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            received.count(self.path, len(body))
            if decode and self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                if decode:
                    received.add_traces(body)
                reply = trace_pb.ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                if decode:
                    received.add_metrics(body)
                reply = metrics_pb.ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
