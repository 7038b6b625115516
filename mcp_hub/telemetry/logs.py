"""Log lines carry ``trace_id``/``span_id`` while a span is active.

:class:`TraceLogFilter` stamps the ids on every record logged inside a traced
call (the hub span in force, else the current OpenTelemetry span), and
:class:`TraceFormatter` appends them to the text format; the JSON format adds
them as fields. Outside a span, or with telemetry off, records are unchanged.
"""

from __future__ import annotations

import logging

from opentelemetry import trace

from mcp_hub.telemetry.spans import current_ids

__all__ = ["TraceFormatter", "TraceLogFilter"]


class TraceLogFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (hex) to records logged under an active span."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = current_ids()
        if ids is not None:  # the hub's own span in force
            record.trace_id = format(ids[0], "032x")
            record.span_id = format(ids[1], "016x")
            return True
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            record.trace_id = format(ctx.trace_id, "032x")
            record.span_id = format(ctx.span_id, "016x")
        return True


class TraceFormatter(logging.Formatter):
    """The text format, with `` trace_id=… span_id=…`` when the record has them."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            text += f" trace_id={trace_id} span_id={getattr(record, 'span_id', '')}"
        return text
