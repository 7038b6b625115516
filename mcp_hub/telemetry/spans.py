"""Spans and duration metrics of one tool call, after the OpenTelemetry MCP conventions.

:meth:`Telemetry.serve` wraps a downstream ``tools/call`` in a SERVER span
``tools/call {tool}`` whose parent is the trace context the client sent:
``_meta.traceparent``/``tracestate`` first, the HTTP ``traceparent`` header
otherwise. The span rides on the call's :class:`~mcp_hub.context.CallContext`
(``call.trace``), so whatever runs for the call finds it without a global:

* each upstream request gets a CLIENT span (:func:`client_span`), current
  while the request is sent, so its context reaches the upstream in the
  request's ``_meta`` (the ``mcp`` SDK writes the current context there) and,
  for HTTP upstreams, in the ``traceparent`` header (:func:`inject_trace_headers`);
* pipeline hooks get INTERNAL children (:meth:`CallSpan.hook`, which the pipeline
  finds on ``call.trace`` without importing this package);
* relayed sampling, elicitation and roots requests get CLIENT children of the
  call's span (:func:`relay_span`), and relayed progress becomes an event on it.

Attributes name the tool, never its arguments or results. The metric labels
are bounded: a tool name the hub does not know is recorded as ``_OTHER``.

With telemetry off the hub holds :data:`OFF`, whose ``serve`` returns one
shared no-op object: the hot path pays two method calls.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["OFF", "CallSpan", "Telemetry", "TelemetryOff", "client_span", "inject_trace_headers",
           "progress_event", "relay_span"]

W3C = TraceContextTextMapPropagator()
OTHER = "_OTHER"
_DURATION_HELP = "Duration of MCP requests as seen by the {side}."


class _Noop:
    """The span of a call when telemetry is off: every method does nothing."""

    __slots__ = ()

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def done(self, result: Any) -> None:
        return None


NOOP = _Noop()


class TelemetryOff:
    """Telemetry not configured (or not installed)."""

    enabled = False

    def serve(self, name: str, call: Any) -> _Noop:
        return NOOP

    def shutdown(self) -> None:
        return None


OFF = TelemetryOff()


def _error_type(exc: BaseException) -> tuple[str, str | None]:
    """``error.type`` and the JSON-RPC code (when there is one) for an exception."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return str(code), str(code)
    if isinstance(exc, TimeoutError):
        return "timeout", None
    return type(exc).__qualname__, None


def _parent(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> Any:
    """The caller's trace context: ``_meta`` first, HTTP headers otherwise; None if neither."""
    for carrier in (meta, headers):
        if carrier and carrier.get("traceparent"):
            try:
                ctx = W3C.extract(carrier)
            except (TypeError, ValueError):
                continue
            if trace.get_current_span(ctx).get_span_context().is_valid:
                return ctx
    return None


#: Durations waiting for the metric reader: (histogram, seconds, attributes), about 100
#: bytes each (attribute dicts are shared). Past this many between two collections a
#: duration is recorded on the call path instead: memory stays bounded, nothing is lost.
MAX_QUEUED_DURATIONS = 100_000
_MAX_LABEL_SETS = 10_000


class Telemetry:
    """Live telemetry: the hub's tracer and the two operation-duration histograms.

    A duration is queued on the call path (a deque append) and recorded into its
    histogram by :meth:`drain`, which runs in the metric reader's thread: it is the
    callback of the gauge ``mcp_hub.telemetry.queued_durations``, and the SDK runs
    observable callbacks at the start of each collection. The SDK's ``record`` costs
    about as much as starting a span, so it stays off the call path.
    """

    enabled = True

    def __init__(self, tracer: Any, meter: Any | None, known_tool: Callable[[str], bool],
                 providers: Any = None) -> None:
        self.tracer = tracer
        self.known_tool = known_tool
        #: The SDK providers (:class:`mcp_hub.telemetry.providers.Providers`), for flushing.
        self.providers = providers
        self.durations: deque[tuple[Any, float, dict[str, str]]] = deque()
        self._label_sets: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
        self.server_duration = self.client_duration = None
        if meter is not None:
            from mcp_hub.telemetry.providers import DURATION_BUCKETS

            self.server_duration = meter.create_histogram(
                "mcp.server.operation.duration", unit="s",
                description=_DURATION_HELP.format(side="server"),
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
            self.client_duration = meter.create_histogram(
                "mcp.client.operation.duration", unit="s",
                description=_DURATION_HELP.format(side="client"),
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
            meter.create_observable_gauge(
                "mcp_hub.telemetry.queued_durations", callbacks=[self._drain_callback],
                unit="{duration}",
                description="Operation durations queued since the last collection.")

    def observe(self, histogram: Any, seconds: float, labels: dict[str, str]) -> None:
        """Queue one duration for ``histogram`` (recorded at once when the queue is full)."""
        key = tuple(labels.items())
        shared = self._label_sets.get(key)
        if shared is None:
            if len(self._label_sets) >= _MAX_LABEL_SETS:
                self._label_sets.clear()
            shared = self._label_sets[key] = labels
        if len(self.durations) < MAX_QUEUED_DURATIONS:
            self.durations.append((histogram, seconds, shared))
        else:
            histogram.record(seconds, shared)

    def drain(self) -> None:
        """Record the queued durations (the metric reader's thread, before it collects)."""
        pop = self.durations.popleft
        while True:
            try:
                histogram, seconds, labels = pop()
            except IndexError:
                return
            histogram.record(seconds, labels)

    def _drain_callback(self, options: Any) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        queued = len(self.durations)
        self.drain()
        return [Observation(queued)]

    def serve(self, name: str, call: Any) -> CallSpan:
        """The SERVER span of one downstream ``tools/call`` (a context manager)."""
        return CallSpan(self, name, call)

    def shutdown(self) -> None:
        """Flush and stop the exporters (blocking, bounded by their timeouts)."""
        if self.providers is not None:
            self.providers.shutdown()


class _Timed:
    """A span plus a duration histogram sample, ended together."""

    __slots__ = ("error", "histogram", "labels", "owner", "span", "started", "token")

    def _open(self, span: Any, histogram: Any, labels: dict[str, str], owner: Telemetry) -> None:
        self.span = span
        self.histogram = histogram
        self.owner = owner
        self.labels = labels
        self.error: str | None = None
        self.token = otel_context.attach(trace.set_span_in_context(span))
        self.started = time.perf_counter()

    def done(self, result: Any) -> None:
        """Mark a result that reports a tool error (``isError``)."""
        if getattr(result, "is_error", False):
            self.error = "tool_error"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        elapsed = time.perf_counter() - self.started
        span = self.span
        message = None
        if exc is not None:
            self.error, code = _error_type(exc)
            if code is not None:
                span.set_attribute("rpc.response.status_code", code)
            message = type(exc).__name__
        if self.error is not None:
            span.set_attribute("error.type", self.error)
            span.set_status(StatusCode.ERROR, message)
            self.labels["error.type"] = self.error
        if self.histogram is not None:
            self.owner.observe(self.histogram, elapsed, self.labels)
        span.end()
        otel_context.detach(self.token)


class CallSpan(_Timed):
    """The SERVER span of one downstream call; ``call.trace`` while it runs."""

    __slots__ = ("call", "name", "tel")

    def __init__(self, tel: Telemetry, name: str, call: Any) -> None:
        self.tel = tel
        self.name = name
        self.call = call

    def __enter__(self) -> CallSpan:
        call, name = self.call, self.name
        transport = getattr(call, "transport", None) or "pipe"
        attrs: dict[str, Any] = {
            "mcp.method.name": "tools/call", "gen_ai.tool.name": name,
            "gen_ai.operation.name": "execute_tool", "network.transport": transport,
        }
        labels = {"mcp.method.name": "tools/call", "network.transport": transport,
                  "gen_ai.tool.name": name if self.tel.known_tool(name) else OTHER}
        if call.request_id is not None:
            attrs["jsonrpc.request.id"] = str(call.request_id)
        version = getattr(call, "protocol_version", None)
        if version:
            attrs["mcp.protocol.version"] = labels["mcp.protocol.version"] = version
        session_id = getattr(call, "session_id", None)
        if session_id:
            attrs["mcp.session.id"] = session_id
        if transport == "tcp":
            attrs["network.protocol.name"] = "http"
        parent = _parent(getattr(call, "meta", None), getattr(call, "headers", None))
        span = self.tel.tracer.start_span(f"tools/call {name}", context=parent,
                                          kind=SpanKind.SERVER, attributes=attrs)
        self._open(span, self.tel.server_duration, labels, self.tel)
        call.trace = self
        return self

    def client(self, server: str, method: str, target: str | None, transport: str | None
               ) -> ClientSpan:
        return ClientSpan(self, server, method, target, transport)

    def child(self, name: str, kind: SpanKind, attrs: dict[str, Any]) -> Any:
        """A span under this call's span, current while it is open."""
        ctx = trace.set_span_in_context(self.span)
        return self.tel.tracer.start_as_current_span(name, context=ctx, kind=kind, attributes=attrs)

    def hook(self, hook: str) -> Any:
        """An INTERNAL span around a pipeline hook (the pipeline finds it on ``call.trace``)."""
        return self.child(f"hook {hook}", SpanKind.INTERNAL, {"mcp_hub.hook": hook})

    def progress(self, progress: float, total: float | None) -> None:
        attrs: dict[str, float] = {"mcp.progress": progress}
        if total is not None:
            attrs["mcp.progress.total"] = total
        self.span.add_event("progress", attrs)


class ClientSpan(_Timed):
    """The CLIENT span of one request from the hub to an upstream server."""

    __slots__ = ("attrs", "call_span", "name")

    def __init__(self, call_span: CallSpan, server: str, method: str, target: str | None,
                 transport: str | None) -> None:
        self.call_span = call_span
        self.name = f"{method} {target}" if target else method
        network = "pipe" if transport == "stdio" else "tcp"
        self.attrs: dict[str, Any] = {"mcp.method.name": method, "mcp_hub.upstream.name": server,
                                      "network.transport": network}
        if target is not None and method == "tools/call":
            self.attrs["gen_ai.tool.name"] = target
            self.attrs["gen_ai.operation.name"] = "execute_tool"

    def __enter__(self) -> ClientSpan:
        tel = self.call_span.tel
        parent = trace.set_span_in_context(self.call_span.span)
        span = tel.tracer.start_span(self.name, context=parent, kind=SpanKind.CLIENT,
                                     attributes=self.attrs)
        labels = {k: v for k, v in self.attrs.items() if k != "gen_ai.operation.name"}
        self._open(span, tel.client_duration, labels, tel)
        return self


def _call_span(call: Any) -> CallSpan | None:
    span = getattr(call, "trace", None) if call is not None else None
    return span if isinstance(span, CallSpan) else None


def client_span(call: Any, server: str, request: Any, transport: str | None) -> ClientSpan | _Noop:
    """The CLIENT span of an upstream request made for ``call`` (no-op when untraced)."""
    owner = _call_span(call)
    if owner is None:
        return NOOP
    method = getattr(request, "method", "request")
    params = getattr(request, "params", None)
    target = getattr(params, "name", None) if method in ("tools/call", "prompts/get") else None
    return owner.client(server, method, target, transport)


def relay_span(call: Any, what: str) -> Any:
    """A CLIENT span, child of the call's span, around a request relayed to the client."""
    owner = _call_span(call)
    if owner is None:
        return NOOP
    return owner.child(what, SpanKind.CLIENT, {"mcp.method.name": what})


def progress_event(call: Any, progress: float, total: float | None) -> None:
    """Record relayed progress on the call's span."""
    owner = _call_span(call)
    if owner is not None:
        owner.progress(progress, total)


async def inject_trace_headers(request: Any) -> None:
    """An httpx request hook: the current span's ``traceparent`` on an upstream HTTP request."""
    if trace.get_current_span().get_span_context().is_valid:
        W3C.inject(request.headers)
