"""The OpenTelemetry SDK side: providers, OTLP/HTTP exporters, and a quiet failure mode.

Spans are the hub's own records (:mod:`mcp_hub.telemetry.record`), exported
through the SDK's OTLP/HTTP span exporter by :class:`~mcp_hub.telemetry.export.SpanQueue`;
no tracer provider is installed, global or not: the ``mcp`` SDK opens a span of
its own around every request it sends, and with a global provider each upstream
call would be traced twice. The meter provider is the hub's own too.

An unreachable collector must not hurt calls: spans wait in a bounded queue
(``OTEL_BSP_MAX_QUEUE_SIZE``, default 2048; the oldest are dropped beyond it)
and are exported from its own thread. The
exporter's per-batch error lines are replaced by one warning when exports
start failing and one line when they work again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mcp_hub.compat.libs import exporter_preferences
from mcp_hub.telemetry.durations import DurationHistogram, with_durations
from mcp_hub.telemetry.export import SpanQueue, readable_span_factory
from mcp_hub.telemetry.otlp_wire import encode_request
from mcp_hub.telemetry.record import Sampler, SpanRecord
from mcp_hub.telemetry.settings import ResolvedTelemetry

__all__ = ["Providers", "build_providers"]

logger = logging.getLogger("mcp_hub.telemetry")

# Histogram boundaries the MCP semantic conventions recommend for operation durations.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry.exporter.http.transport",
    "opentelemetry.sdk._shared_internal",
    "opentelemetry.sdk.metrics._internal.export",
)


class ExportHealth:
    """Turns a stream of export outcomes into one log line per outage and per recovery."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.failing = False
        self.failures = 0
        self.last_reason = ""
        self._lock = threading.Lock()

    def record(self, ok: bool, what: str) -> None:
        with self._lock:
            if ok:
                if self.failing:
                    self.failing = False
                    logger.info("telemetry: exporting to %s works again", self.label)
                return
            self.failures += 1
            if self.failing:
                return
            self.failing = True
        reason = f" ({self.last_reason})" if self.last_reason else ""
        logger.warning("telemetry: cannot export %s to %s%s; dropping telemetry until it answers "
                       "(logged once per outage)", what, self.label, reason)


class _Swallow(logging.Filter):
    """Keeps the exporters' own per-batch error lines out of the log; remembers the last."""

    def __init__(self, health: ExportHealth) -> None:
        super().__init__()
        self.health = health

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and ".exporter." in record.name:
            self.health.last_reason = record.getMessage()[:200]
        return False

    def install(self) -> None:
        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self)

    def remove(self) -> None:
        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _quiet_span_exporter(inner: Any, health: ExportHealth, resource: Any, scope: Any) -> Any:
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    build = readable_span_factory(resource, scope)
    attributes = dict(resource.attributes)
    client = getattr(inner, "_client", None)
    direct = client is not None and callable(getattr(client, "export", None))

    class QuietSpanExporter(SpanExporter):
        def export_records(self, records: list[SpanRecord]) -> None:
            """Encode directly and post with the SDK exporter's HTTP client (its headers,
            compression, timeout, retries); through ``ReadableSpan`` without one."""
            if not direct:
                self.export([build(r) for r in records])
                return
            ok = False
            try:
                data = encode_request(records, attributes, scope.name, scope.version or "")
                outcome = client.export(data)  # type: ignore[union-attr]
                ok = bool(getattr(outcome, "success", False))
                if not ok:
                    health.last_reason = str(getattr(outcome, "status_code", None) or
                                             type(getattr(outcome, "error", None)).__name__)
            except Exception as exc:
                health.last_reason = type(exc).__name__
            health.record(ok, "spans")

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            try:
                result = inner.export(spans)
            except Exception as exc:
                health.last_reason = type(exc).__name__
                result = SpanExportResult.FAILURE
            health.record(result is SpanExportResult.SUCCESS, "spans")
            return result  # type: ignore[no-any-return]

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(inner.force_flush(timeout_millis))

    return QuietSpanExporter()


def _quiet_metric_exporter(inner: Any, health: ExportHealth, durations: list[DurationHistogram],
                           resource: Any, scope: Any) -> Any:
    """The OTLP metric exporter, quiet on failure, adding the hub's own duration
    histograms (:mod:`mcp_hub.telemetry.durations`) to every collection it sends."""
    from opentelemetry.sdk.metrics import Histogram
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        MetricExporter,
        MetricExportResult,
    )

    temporality, aggregation = exporter_preferences(inner)
    delta = temporality.get(Histogram) == AggregationTemporality.DELTA

    class QuietMetricExporter(MetricExporter):
        def __init__(self) -> None:
            super().__init__(preferred_temporality=temporality, preferred_aggregation=aggregation)

        def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kw: Any
                   ) -> MetricExportResult:
            try:
                metrics_data = with_durations(metrics_data, durations, resource, scope, delta)
                result = inner.export(metrics_data, timeout_millis=timeout_millis, **kw)
            except Exception as exc:
                health.last_reason = type(exc).__name__
                result = MetricExportResult.FAILURE
            health.record(result is MetricExportResult.SUCCESS, "metrics")
            return result  # type: ignore[no-any-return]

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            return bool(inner.force_flush(timeout_millis))

        def shutdown(self, timeout_millis: float = 30_000, **kw: Any) -> None:
            inner.shutdown()

    return QuietMetricExporter()


@dataclass
class Providers:
    """The hub's span queue and meter provider, and how their exports are doing."""

    span_queue: SpanQueue
    meter_provider: Any | None
    health: ExportHealth
    swallow: _Swallow
    #: Parent-based sampling at the configured ratio for new traces.
    sampler: Sampler
    #: The hub's own duration histograms, added to each metric export (Telemetry fills it).
    durations: list[DurationHistogram]

    def shutdown(self) -> None:
        """Flush and stop (blocking; bounded by the exporters' own timeouts)."""
        try:
            self.span_queue.shutdown()
            if self.meter_provider is not None:
                self.meter_provider.shutdown(timeout_millis=5_000)
        finally:
            self.swallow.remove()


def build_providers(settings: ResolvedTelemetry, service_version: str) -> Providers:
    """Providers exporting over OTLP/HTTP; ImportError when the SDK is not installed."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    health = ExportHealth(settings.label)
    swallow = _Swallow(health)
    swallow.install()
    resource = Resource.create({SERVICE_NAME: settings.service_name,
                                SERVICE_VERSION: service_version})
    # The hub flushes at its own exit, bounded (mcp_hub.telemetry.stop_telemetry); an
    # interpreter-exit flush would wait out the exporter's timeout on a dead collector.
    scope = InstrumentationScope("mcp_hub", service_version)
    exporter = _quiet_span_exporter(OTLPSpanExporter(endpoint=settings.traces_endpoint), health,
                                    resource, scope)
    queue = SpanQueue(exporter)
    meter_provider = None
    durations: list[DurationHistogram] = []
    if settings.metrics:
        metric_exporter = _quiet_metric_exporter(
            OTLPMetricExporter(endpoint=settings.metrics_endpoint), health, durations, resource,
            scope)
        reader = PeriodicExportingMetricReader(
            metric_exporter, export_interval_millis=settings.metric_interval_seconds * 1000.0)
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader],
                                       shutdown_on_exit=False)
    return Providers(queue, meter_provider, health, swallow, Sampler(settings.sample_ratio),
                     durations)
