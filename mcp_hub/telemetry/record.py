"""The hub's own span records: what a call pays for a span is a few slots and a deque append.

The OpenTelemetry SDK's ``Span`` validates every attribute, takes a lock per
span, runs a sampler object, and needs the context attached to propagate; on a
proxy's hot path that costs more than the proxying itself. The hub's spans are
few and of known shape (string and number attributes it sets itself), so it
records them as :class:`SpanRecord` — ids, times, attributes, events, links —
and the exporter thread (:mod:`mcp_hub.telemetry.export`) turns each finished,
sampled record into the SDK's ``ReadableSpan`` for the OTLP exporter, off the
call path.

Propagation is direct as well: the caller's W3C ``traceparent`` is parsed here,
the outgoing one formatted from the record's ids, and the span in force for log
lines and HTTP headers is one :data:`CURRENT` context variable of this package.

This module imports only the standard library.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

__all__ = ["CURRENT", "Sampler", "SpanRecord", "parse_traceparent"]

#: SpanKind values (as opentelemetry.trace.SpanKind numbers them).
INTERNAL, SERVER, CLIENT = 0, 1, 2

_TRACEPARENT = re.compile(r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?[ \t]*")
#: Longest ``traceparent`` taken (version 00 is 55 characters; later versions may append
#: fields) and longest ``tracestate`` (the length W3C Trace Context asks systems to pass on).
MAX_TRACEPARENT, MAX_TRACESTATE = 256, 512
_getrandbits = random.getrandbits
_now = time.time_ns

#: The hub span in force in this task (server, client or hook span; an object with its
#: :class:`SpanRecord` as ``rec``), for log lines (mcp_hub.telemetry.logs) and the
#: ``traceparent`` header of HTTP upstream requests.
CURRENT: ContextVar[Any] = ContextVar("mcp_hub_span", default=None)


class Parent:
    """A caller's trace context: ids, its sampled flag and its ``tracestate``."""

    __slots__ = ("head", "sampled", "span_id", "trace_id", "traceparent", "tracestate")

    def __init__(self, trace_id: int, span_id: int, sampled: bool, tracestate: str | None,
                 head: str | None = None, traceparent: str | None = None) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.sampled = sampled
        self.tracestate = tracestate
        #: ``"00-<trace id in hex>-"``: how every ``traceparent`` of this trace begins.
        self.head = head
        #: The ``traceparent`` as the caller sent it (spaces and tabs around it dropped).
        self.traceparent = traceparent


def parse_traceparent(value: Any, tracestate: Any = None) -> Parent | None:
    """The W3C ``traceparent`` (and ``tracestate``) as a :class:`Parent`; None if invalid."""
    if not isinstance(value, str) or len(value) > MAX_TRACEPARENT:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_hex, span_hex, flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest):
        return None
    trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
    if not trace_id or not span_id:
        return None
    state = (tracestate if isinstance(tracestate, str) and 0 < len(tracestate) <= MAX_TRACESTATE
             else None)
    return Parent(trace_id, span_id, bool(int(flags, 16) & 1), state, f"00-{trace_hex}-",
                  value.strip(" \t"))


def parent_from(meta: Mapping[str, Any] | None, headers: Mapping[str, str] | None) -> Parent | None:
    """The caller's context: ``_meta`` first, HTTP headers otherwise; None if neither."""
    if meta and (type(meta) is dict or isinstance(meta, Mapping)):
        tp = meta.get("traceparent")
        if tp is not None:
            parent = parse_traceparent(tp, meta.get("tracestate"))
            if parent is not None:
                return parent
    if headers:
        tp = headers.get("traceparent")
        if tp is not None:
            return parse_traceparent(tp, headers.get("tracestate"))
    return None


class Sampler:
    """Parent-based sampling with a trace-id ratio for new traces (the SDK's default rule)."""

    __slots__ = ("bound", "ratio")

    def __init__(self, ratio: float) -> None:
        self.ratio = ratio
        # The SDK's TraceIdRatioBased: the low 64 bits of the trace id below ratio * 2**64.
        self.bound = round(ratio * (1 << 64))

    def new_trace(self, trace_id: int) -> bool:
        return self.ratio >= 1.0 or (trace_id & 0xFFFFFFFFFFFFFFFF) < self.bound


class SpanRecord:
    """One span: ids, kind, name, attributes, times, events, links, status.

    Sampled records go to the export queue when they end; unsampled ones still
    carry ids, so the trace context reaches upstreams with the caller's decision.
    """

    __slots__ = ("attrs", "end", "error", "events", "head", "kind", "links", "message", "name",
                 "parent_id", "remote_parent", "sampled", "span_id", "start", "trace_id",
                 "tracestate")

    def __init__(self, name: str, kind: int, attrs: dict[str, Any], trace_id: int,
                 parent_id: int, sampled: bool, tracestate: str | None, remote_parent: bool,
                 head: str | None = None) -> None:
        self.name = name
        self.kind = kind
        self.attrs = attrs
        self.trace_id = trace_id
        self.span_id = _getrandbits(64) or 1
        self.parent_id = parent_id
        self.sampled = sampled
        self.tracestate = tracestate
        self.remote_parent = remote_parent
        #: ``"00-<trace id in hex>-"``, shared along the trace (formatted once, not per request).
        self.head = head
        self.events: list[tuple[str, int, dict[str, Any]]] | None = None
        self.links: list[tuple[int, int]] | None = None
        self.error: str | None = None
        self.message: str | None = None
        self.end = 0
        self.start = _now()

    @classmethod
    def root(cls, name: str, kind: int, attrs: dict[str, Any], parent: Parent | None,
             sampler: Sampler) -> SpanRecord:
        """A span whose parent is the caller's context (or a new trace)."""
        if parent is not None:
            return cls(name, kind, attrs, parent.trace_id, parent.span_id, parent.sampled,
                       parent.tracestate, True, parent.head)
        trace_id = _getrandbits(128) or 1
        return cls(name, kind, attrs, trace_id, 0, sampler.new_trace(trace_id), None, False)

    def child(self, name: str, kind: int, attrs: dict[str, Any]) -> SpanRecord:
        """A span under this one, in the same trace and with its sampling decision."""
        return SpanRecord(name, kind, attrs, self.trace_id, self.span_id, self.sampled,
                          self.tracestate, False, self._head())

    def traceparent(self) -> str:
        """This span as a W3C ``traceparent``, for the requests it makes."""
        return f"{self._head()}{self.span_id:016x}{'-01' if self.sampled else '-00'}"

    def _head(self) -> str:
        """``"00-<trace id in hex>-"``, formatted once per trace (a new trace's first use)."""
        head = self.head
        if head is None:
            head = self.head = f"00-{self.trace_id:032x}-"
        return head

    def event(self, name: str, attrs: dict[str, Any]) -> None:
        if self.events is None:
            self.events = []
        self.events.append((name, _now(), attrs))

    def link(self, other: SpanRecord) -> None:
        """An OpenTelemetry span link to ``other``."""
        if self.links is None:
            self.links = []
        self.links.append((other.trace_id, other.span_id))

    def finish(self) -> None:
        self.end = _now()
