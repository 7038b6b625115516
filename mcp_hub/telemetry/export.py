"""Finished spans wait in a bounded queue; a thread turns them into OTLP exports.

The call path appends one :class:`~mcp_hub.telemetry.record.SpanRecord` to a
``deque`` (the oldest are dropped past ``OTEL_BSP_MAX_QUEUE_SIZE``, default
2048, and counted). Every ``OTEL_BSP_SCHEDULE_DELAY`` ms (default 5000), or as
soon as ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` (default 512) spans wait, the
exporter thread hands them to the exporter in batches: encoded directly to OTLP
(:mod:`mcp_hub.telemetry.otlp_wire`) and posted by the SDK's OTLP/HTTP client,
or as the SDK's ``ReadableSpan`` objects (:func:`readable_span_factory`) where
that client is not available. An unreachable collector costs the calls nothing: the
queue stays bounded and the thread retries with the next batch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from mcp_hub.telemetry.record import SpanRecord

__all__ = ["SpanQueue"]

logger = logging.getLogger("mcp_hub.telemetry")


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, "") or default)
    except ValueError:
        return default
    return value if value > 0 else default


def readable_span_factory(resource: Any, scope: Any) -> Callable[[SpanRecord], Any]:
    """A function from a record to the SDK's ``ReadableSpan`` (in the exporter thread)."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

    sampled = TraceFlags(TraceFlags.SAMPLED)
    kinds = {0: SpanKind.INTERNAL, 1: SpanKind.SERVER, 2: SpanKind.CLIENT}
    unset = Status(StatusCode.UNSET)

    def build(rec: SpanRecord) -> Any:
        state = TraceState.from_header([rec.tracestate]) if rec.tracestate else None
        ctx = SpanContext(rec.trace_id, rec.span_id, False, sampled, state)
        parent = (SpanContext(rec.trace_id, rec.parent_id, rec.remote_parent, sampled, state)
                  if rec.parent_id else None)
        events = [Event(name, attrs, ts) for name, ts, attrs in rec.events or ()]
        links = [Link(SpanContext(t, s, False, sampled)) for t, s in rec.links or ()]
        status = Status(StatusCode.ERROR, rec.message) if rec.error is not None else unset
        return ReadableSpan(rec.name, ctx, parent, resource, rec.attrs, events, links,
                            kinds[rec.kind], status=status, start_time=rec.start,
                            end_time=rec.end, instrumentation_scope=scope)

    return build


class SpanQueue:
    """The bounded queue of finished spans and the thread that exports them."""

    def __init__(self, exporter: Any) -> None:
        #: Has ``export_records(list of SpanRecord)`` (providers' quiet exporter).
        self.exporter = exporter
        self.max_queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        self.batch = min(_env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512), self.max_queue)
        self.delay = _env_int("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000.0
        self.queue: deque[SpanRecord] = deque(maxlen=self.max_queue)
        #: Spans dropped because the queue was full (the oldest go first).
        self.dropped = 0
        self._wake = threading.Event()
        self._stopping = False
        #: Called in this thread before each export round (the duration queue's drain).
        self.on_tick: list[Callable[[], None]] = []
        self._thread = threading.Thread(target=self._run, name="mcp-hub-otlp-spans", daemon=True)
        self._thread.start()

    def add(self, rec: SpanRecord) -> None:
        """Queue one finished span (the call path: an append, rarely a wake-up)."""
        queue = self.queue
        if len(queue) >= self.batch:
            if len(queue) == self.max_queue:
                self.dropped += 1
            self._wake.set()
        queue.append(rec)

    def wake(self) -> None:
        """Run an export round now rather than at the next scheduled one."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.delay)
            self._wake.clear()
            for tick in self.on_tick:
                try:
                    tick()
                except Exception:
                    logger.debug("telemetry tick failed", exc_info=True)
            self._export_all()

    def _export_all(self) -> None:
        # Only what waits now: spans finished while a batch is posted wait for the next
        # round, so the thread never chases the call path with batches of a few spans.
        pop = self.queue.popleft
        left = len(self.queue)
        while left > 0:
            batch: list[SpanRecord] = []
            try:
                while len(batch) < self.batch and left > 0:
                    batch.append(pop())
                    left -= 1
            except IndexError:
                left = 0
            if not batch:
                return
            try:
                self.exporter.export_records(batch)
            except Exception:  # the quiet exporter logs outages; never kill the thread
                logger.debug("span export failed", exc_info=True)

    def force_flush(self) -> None:
        """Export what waits now, in the caller's thread."""
        self._export_all()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the thread, export what is left, close the exporter."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        self._export_all()
        self.exporter.shutdown()
