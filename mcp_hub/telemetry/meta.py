"""The trace context out: a client span's ``traceparent`` in an upstream request's ``_meta``."""

from __future__ import annotations

from typing import Any

from mcp_hub.telemetry.record import SpanRecord

__all__ = ["write_meta"]


def write_meta(params: Any, rec: SpanRecord) -> None:
    """``traceparent`` (and ``tracestate``) of ``rec`` into ``params``' ``_meta``.

    A request without ``_meta`` (the usual case) gets a new dict straight in the
    model's ``__dict__`` and ``meta`` marked as set, as pydantic's own assignment
    leaves it, without its validating ``__setattr__`` (a few µs per upstream call).
    """
    meta = params.meta
    if meta is None:
        meta = {"traceparent": rec.traceparent()}
        fields = getattr(params, "__pydantic_fields_set__", None)
        values = getattr(params, "__dict__", None)
        if isinstance(fields, set) and isinstance(values, dict) and "meta" in values:
            values["meta"] = meta
            fields.add("meta")
        else:
            params.meta = meta
    else:
        meta["traceparent"] = rec.traceparent()
    if rec.tracestate:
        meta["tracestate"] = rec.tracestate
