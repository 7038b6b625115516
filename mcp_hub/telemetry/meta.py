"""The trace context out: a client span's ``traceparent`` in an upstream request's ``_meta``,
or, when the hub does not trace the call, the caller's own context passed on unchanged."""

from __future__ import annotations

from typing import Any

from mcp_hub.telemetry.record import SpanRecord, parent_from

__all__ = ["pass_meta", "write_meta"]


def write_meta(params: Any, rec: SpanRecord) -> None:
    """``traceparent`` (and ``tracestate``) of ``rec`` into ``params``' ``_meta``."""
    _put(params, rec.traceparent(), rec.tracestate)


def pass_meta(params: Any, caller_meta: Any, headers: Any = None) -> None:
    """The caller's W3C trace context (``traceparent``, ``tracestate``) into ``params``'
    ``_meta``, as it came: the hub is transparent to a trace it does not record, as the
    W3C Trace Context recommendation asks of systems that do not participate.

    The context is the request's ``_meta`` first, its HTTP headers (``headers``, a
    mapping with case-insensitive or lower-case keys) otherwise, as when the hub
    traces. Only a valid context passes: a malformed or overlong ``traceparent``
    passes nothing, one with spaces or tabs around it passes without them, and a
    ``tracestate`` longer than ``MAX_TRACESTATE`` is dropped. Anything else the
    caller's ``_meta`` or headers hold stays with the hub.
    """
    parent = parent_from(caller_meta, headers)
    if parent is not None and parent.traceparent is not None:
        _put(params, parent.traceparent, parent.tracestate)


def _put(params: Any, traceparent: str, tracestate: str | None) -> None:
    """``traceparent`` (and ``tracestate``) into ``params``' ``_meta``.

    A request without ``_meta`` (the usual case) gets a new dict straight in the
    model's ``__dict__`` and ``meta`` marked as set, as pydantic's own assignment
    leaves it, without its validating ``__setattr__`` (a few µs per upstream call).
    """
    meta = params.meta
    if meta is None:
        meta = {"traceparent": traceparent}
        fields = getattr(params, "__pydantic_fields_set__", None)
        values = getattr(params, "__dict__", None)
        if isinstance(fields, set) and isinstance(values, dict) and "meta" in values:
            values["meta"] = meta
            fields.add("meta")
        else:
            params.meta = meta
    else:
        meta["traceparent"] = traceparent
    if tracestate:
        meta["tracestate"] = tracestate
