"""Spans and duration metrics of the hub's requests, after the OpenTelemetry MCP conventions.

Every downstream request gets a SERVER span named ``{mcp.method.name} {target}``
(the tool, prompt or resource URI; just the method when there is none), whose
parent is the trace context the client sent: ``_meta.traceparent``/``tracestate``
first, the HTTP ``traceparent`` header otherwise. :meth:`Telemetry.serve` opens
it for ``tools/call`` (from :meth:`Hub.call_tool`, so every transport and the
bridge's ``tool_call`` share it), :meth:`Telemetry.request` for every other
request (the SDK server's middleware, :mod:`mcp_hub.telemetry.middleware`, and
the fast paths' lists). The span rides on the call's
:class:`~mcp_hub.pipeline.context.CallContext` (``call.trace``) and is the span in force
(:data:`~mcp_hub.telemetry.record.CURRENT`) while the request runs:

* each upstream request gets a CLIENT span (:func:`client_span`) whose W3C
  ``traceparent`` is written into the request's ``_meta`` and, for HTTP
  upstreams, into its headers (:func:`inject_trace_headers`);
* pipeline hooks get INTERNAL children (:meth:`_Timed.hook`, which the pipeline
  finds on ``call.trace`` without importing this package);
* relayed sampling, elicitation and roots requests and relayed progress get
  spans under the call's span that also LINK to it (:func:`relay_span`,
  :func:`progress_event`); progress is an event on the call's span as well.

Attributes name the tool, prompt or resource, never arguments or results. The
metric labels are bounded: a tool name the hub does not know is recorded as
``_OTHER``, and prompt names and URIs are not labels. A call of an upstream tool
also carries the upstream's own name for it (:data:`UPSTREAM_TOOL`, on the span
and as a label): it differs from ``gen_ai.tool.name`` (the exposed name the
client called) by the prefix and by any rewrite (docs/rewriting.md).

The spans are the hub's own light records (:mod:`mcp_hub.telemetry.record`),
exported off the call path (:mod:`mcp_hub.telemetry.export`). With telemetry
off the hub holds :data:`OFF`, whose ``serve`` and ``request`` return one shared
no-op object: the hot path pays two method calls.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from mcp_hub.telemetry.meta import pass_meta, write_meta
from mcp_hub.telemetry.off import NOOP, OFF, TelemetryOff, _Noop
from mcp_hub.telemetry.record import (
    CLIENT,
    CURRENT,
    INTERNAL,
    SERVER,
    Sampler,
    SpanRecord,
    parent_from,
)
from mcp_hub.telemetry.shapes import Shape, client_shape, server_shape

__all__ = [
    "OFF",
    "UPSTREAM_TOOL",
    "CallSpan",
    "Telemetry",
    "TelemetryOff",
    "client_span",
    "current_ids",
    "inject_trace_headers",
    "progress_event",
    "relay_span",
]

_DURATION_HELP = "Duration of MCP requests as seen by the {side}."


def _error_type(exc: BaseException) -> tuple[str, str | None]:
    """``error.type`` and the JSON-RPC code (when there is one) for an exception."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    if isinstance(code, int):
        return str(code), str(code)
    if isinstance(exc, TimeoutError):
        return "timeout", None
    return type(exc).__qualname__, None


#: Durations waiting for the metric reader: (histogram, seconds, attributes), about 100
#: bytes each (attribute dicts are shared). Past this many between two collections a
#: duration is recorded on the call path instead: memory stays bounded, nothing is lost.
MAX_QUEUED_DURATIONS = 100_000
_MAX_LABEL_SETS = 10_000
#: Queued durations that wake the exporter thread to drain them before its next round.
_WAKE_AT = 10_000


class Telemetry:
    """Live telemetry: sampling, the span queue and the two operation-duration histograms.

    A duration is queued on the call path (a deque append) and recorded into its
    histogram by :meth:`drain`, off the call path: in the span exporter's thread at
    each of its rounds (every ``OTEL_BSP_SCHEDULE_DELAY``, and at once when many
    wait), and in the metric reader's thread before each collection (the callback
    of the gauge ``mcp_hub.telemetry.queued_durations``). The histograms are the
    hub's own (:mod:`mcp_hub.telemetry.durations`, about 1 µs per value; the SDK's
    ``Histogram.record`` took 12–37 µs in the exporter thread, under the GIL).
    """

    enabled = True

    def __init__(self, sampler: Sampler | None, meter: Any | None,
                 known_tool: Callable[[str], bool], providers: Any = None,
                 spans: Any = None) -> None:
        self.sampler = sampler or Sampler(1.0)
        self.known_tool = known_tool
        #: The SDK side (:class:`mcp_hub.telemetry.providers.Providers`), for flushing.
        self.providers = providers
        #: Where finished sampled spans go (``add(record)``).
        self.spans = spans if spans is not None else providers.span_queue
        self.durations: deque[tuple[Any, float, dict[str, str]]] = deque()
        ticks = getattr(self.spans, "on_tick", None)
        if ticks is not None:
            ticks.append(self.drain)
        self._label_sets: dict[tuple[Any, ...], dict[str, str]] = {}
        #: Name, attributes and labels by kind of request (bounded, see :meth:`shape`).
        self.shapes: dict[tuple[Any, ...], Shape] = {}
        self.server_duration = self.client_duration = None
        if meter is not None:
            from mcp_hub.telemetry.durations import DurationHistogram
            from mcp_hub.telemetry.providers import DURATION_BUCKETS

            self.server_duration = DurationHistogram(
                "mcp.server.operation.duration", "s", _DURATION_HELP.format(side="server"),
                DURATION_BUCKETS)
            self.client_duration = DurationHistogram(
                "mcp.client.operation.duration", "s", _DURATION_HELP.format(side="client"),
                DURATION_BUCKETS)
            exported = getattr(providers, "durations", None)
            if isinstance(exported, list):
                exported += [self.server_duration, self.client_duration]
            meter.create_observable_gauge(
                "mcp_hub.telemetry.queued_durations", callbacks=[self._drain_callback],
                unit="{duration}",
                description="Operation durations queued since the last collection.")

    def labels(self, key: tuple[Any, ...], make: Callable[[], dict[str, str]]) -> dict[str, str]:
        """The one shared label dict of ``key`` (built by ``make`` the first time)."""
        shared = self._label_sets.get(key)
        if shared is None:
            if len(self._label_sets) >= _MAX_LABEL_SETS:
                self._label_sets.clear()
            shared = self._label_sets[key] = make()
        return shared

    def shape(self, key: tuple[Any, ...], make: Callable[[tuple[Any, ...]], Shape]) -> Shape:
        """The shared :class:`Shape` of ``key``, built by ``make`` the first time."""
        if len(self.shapes) >= _MAX_LABEL_SETS:
            self.shapes.clear()
        shape = self.shapes[key] = make(key)
        return shape

    def observe(self, histogram: Any, seconds: float, labels: dict[str, str]) -> None:
        """Queue one duration for ``histogram`` (recorded at once when the queue is full)."""
        durations = self.durations
        queued = len(durations)
        if queued < MAX_QUEUED_DURATIONS:
            durations.append((histogram, seconds, labels))
            if queued == _WAKE_AT:
                self.spans.wake()  # the exporter thread drains them now
        else:
            histogram.record(seconds, labels)

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
        return CallSpan(self, "tools/call", name, call, call)

    def request(self, method: str, target: str | None, call: Any = None, **info: Any) -> CallSpan:
        """The SERVER span of any other downstream request.

        ``call`` (a CallContext) or keywords give what the request carried:
        ``request_id``, ``meta``, ``headers``, ``transport``, ``protocol_version``,
        ``session_id``.
        """
        return CallSpan(self, method, target, call if call is not None else _Info(info), None)

    def shutdown(self) -> None:
        """Flush and stop the exporters (blocking, bounded by their timeouts)."""
        if self.providers is not None:
            self.providers.shutdown()


class _Info:
    """Keyword request details, read like a CallContext's attributes."""

    __slots__ = ("headers", "meta", "protocol_version", "request_id", "session_id", "transport")

    def __init__(self, info: dict[str, Any]) -> None:
        get = info.get
        self.request_id, self.meta = get("request_id"), get("meta")
        self.transport, self.protocol_version = get("transport"), get("protocol_version")
        self.session_id = get("session_id")
        headers = get("headers")
        if isinstance(headers, list):  # raw ASGI headers
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in headers
                       if k.lower() in (b"traceparent", b"tracestate")}
        self.headers = headers


class _Timed:
    """A span record with its telemetry and duration histogram, current while open."""

    __slots__ = ("error", "histogram", "labels", "rec", "tel", "token")

    tel: Telemetry

    def _open(self, rec: SpanRecord, histogram: Any, labels: dict[str, str] | None) -> None:
        self.rec = rec
        self.histogram = histogram
        self.labels = labels
        self.error: str | None = None
        self.token = CURRENT.set(self)

    def done(self, result: Any) -> None:
        """Mark a result that reports a tool error (``isError``)."""
        if getattr(result, "is_error", False):
            self.error = "tool_error"

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        rec = self.rec
        rec.finish()
        CURRENT.reset(self.token)
        error = self.error
        if exc is not None:
            error, code = _error_type(exc)
            if code is not None:
                rec.attrs["rpc.response.status_code"] = code
            rec.message = type(exc).__name__
        labels = self.labels
        if error is not None:
            rec.error = rec.attrs["error.type"] = error
            if labels is not None:
                base = labels
                labels = self.tel.labels((*base.items(), error), lambda: {**base, "error.type": error})
        if rec.sampled:
            self.tel.spans.add(rec)
        if self.histogram is not None and labels is not None:
            self.tel.observe(self.histogram, (rec.end - rec.start) / 1e9, labels)

    # -- spans under this one ------------------------------------------------------
    def client(self, server: str, method: str, target: str | None, transport: str | None
               ) -> ClientSpan:
        return ClientSpan(self, server, method, target, transport)

    def child(self, name: str, kind: int, attrs: dict[str, Any], link: bool = False) -> _Child:
        """A span under this one, current while it is open; ``link`` also links it here."""
        return _Child(self, name, kind, attrs, link)

    def hook(self, hook: str) -> _Child:
        """An INTERNAL span around a pipeline hook (the pipeline finds it on ``call.trace``)."""
        return self.child(f"hook {hook}", INTERNAL, {"mcp_hub.hook": hook})

    def progress(self, progress: float, total: float | None) -> None:
        attrs: dict[str, float] = {"mcp.progress": progress}
        if total is not None:
            attrs["mcp.progress.total"] = total
        self.rec.event("progress", attrs)
        with self.child("notifications/progress", CLIENT,
                        {"mcp.method.name": "notifications/progress", **attrs}, link=True):
            pass


#: The upstream's own name of the tool a call ran (span attribute and metric label).
UPSTREAM_TOOL = "mcp_hub.upstream.tool.name"


class CallSpan(_Timed):
    """The SERVER span of one downstream request; ``call.trace`` while it runs."""

    __slots__ = ("call", "info", "known", "method", "target")

    def __init__(self, tel: Telemetry, method: str, target: str | None, info: Any,
                 call: Any) -> None:
        self.tel = tel
        self.method = method
        self.target = target
        self.info = info
        self.call = call

    def __enter__(self) -> CallSpan:
        info, method, target, tel = self.info, self.method, self.target, self.tel
        key = (method, target, info.transport, info.protocol_version, info.session_id)
        shape = tel.shapes.get(key)
        if shape is None:
            shape = tel.shape(key, server_shape)
        attrs = shape.attrs.copy()
        rid = info.request_id
        if rid is not None:
            attrs["jsonrpc.request.id"] = str(rid)
        rec = SpanRecord.root(shape.name, SERVER, attrs, parent_from(info.meta, info.headers),
                              tel.sampler)
        labels = self.known = shape.labels
        if shape.other is not None and not tel.known_tool(target):  # type: ignore[arg-type]
            labels = shape.other
        self._open(rec, tel.server_duration, labels)
        if self.call is not None:
            self.call.trace = self
        # No reference back to the call: no cycle, it is freed the moment it is done.
        self.info = self.call = None
        return self

    def tool(self, upstream: str | None) -> None:
        """The call ran a registered tool (a profile's own name for one counts): its
        metric labels name it, and ``upstream`` (the upstream's own name, None for a
        hub or plugin tool) is an attribute and a label too."""
        base = self.known
        if upstream is None:
            self.labels = base
            return
        self.rec.attrs[UPSTREAM_TOOL] = upstream
        self.labels = self.tel.labels((*base.items(), UPSTREAM_TOOL, upstream),
                                      lambda: {**base, UPSTREAM_TOOL: upstream})


class _Child(_Timed):
    """An INTERNAL or CLIENT span under another hub span (hooks, relays)."""

    __slots__ = ("args",)

    def __init__(self, parent: _Timed, name: str, kind: int, attrs: dict[str, Any],
                 link: bool) -> None:
        self.tel = parent.tel
        self.args = (parent.rec, name, kind, attrs, link)

    def __enter__(self) -> _Child:
        parent, name, kind, attrs, link = self.args
        rec = parent.child(name, kind, attrs)
        if link:
            rec.link(parent)
        self._open(rec, None, None)
        return self


class ClientSpan(_Timed):
    """The CLIENT span of one request from the hub to an upstream server."""

    __slots__ = ("key", "owner", "request")

    def __init__(self, owner: _Timed, server: str, method: str, target: str | None,
                 transport: str | None) -> None:
        self.tel = owner.tel
        self.owner = owner
        self.key = (server, method, target, transport)
        self.request: Any = None

    def __enter__(self) -> ClientSpan:
        tel = self.tel
        shape = tel.shapes.get(self.key)
        if shape is None:
            shape = tel.shape(self.key, client_shape)
        rec = self.owner.rec.child(shape.name, CLIENT, shape.attrs.copy())
        self._open(rec, tel.client_duration, shape.labels)
        params = getattr(self.request, "params", None)
        if params is not None:  # the trace context out, in the request's _meta
            write_meta(params, rec)
        return self


def _owner(call: Any) -> _Timed | None:
    span = getattr(call, "trace", None) if call is not None else None
    if isinstance(span, _Timed):
        return span
    current: _Timed | None = CURRENT.get()
    return current


_TARGETED = frozenset(("tools/call", "prompts/get"))


def client_span(call: Any, server: str, request: Any, transport: str | None) -> ClientSpan | _Noop:
    """The CLIENT span of an upstream request made for ``call``.

    Entering it writes the span's ``traceparent`` into ``request``'s ``_meta``. When
    the hub has no span for ``call`` (telemetry off, or a request outside any
    traced one), the span is a no-op, and the trace context the client sent
    (``_meta`` first, HTTP headers otherwise), if valid, is written into
    ``request``'s ``_meta`` as it came instead, so a trace the hub does not record
    still joins the client's and the upstream's spans.
    """
    owner = _owner(call)
    if owner is None:
        if call is not None:
            caller_meta, headers = getattr(call, "meta", None), getattr(call, "headers", None)
            if caller_meta or headers:
                params = getattr(request, "params", None)
                if params is not None:
                    pass_meta(params, caller_meta, headers)
        return NOOP
    method = getattr(request, "method", "request")
    params = getattr(request, "params", None)
    target = getattr(params, "name", None) if method in _TARGETED else (
        str(params.uri) if method == "resources/read" and params is not None else None)
    span = owner.client(server, method, target, transport)
    span.request = request
    return span


def relay_span(call: Any, what: str) -> _Child | _Noop:
    """A CLIENT span around a request relayed to the client: a child of the call's span,
    and linked to it."""
    span = getattr(call, "trace", None) if call is not None else None
    if not isinstance(span, _Timed):
        return NOOP
    return span.child(what, CLIENT, {"mcp.method.name": what}, link=True)


def progress_event(call: Any, progress: float, total: float | None) -> None:
    """Record relayed progress: an event on the call's span and a span linked to it."""
    span = getattr(call, "trace", None) if call is not None else None
    if isinstance(span, _Timed):
        span.progress(progress, total)


async def inject_trace_headers(request: Any) -> None:
    """An httpx request hook: the hub span in force as ``traceparent`` on an upstream request."""
    span = CURRENT.get()
    if span is not None:
        rec = span.rec
        request.headers["traceparent"] = rec.traceparent()
        if rec.tracestate:
            request.headers["tracestate"] = rec.tracestate


def current_ids(span: Any = None) -> tuple[int, int] | None:
    """(trace id, span id) of the hub span in force, for log lines."""
    span = span if span is not None else CURRENT.get()
    return None if span is None else (span.rec.trace_id, span.rec.span_id)

