"""The hub's span records as an OTLP ``ExportTraceServiceRequest``, encoded directly.

The SDK's encoder builds a protobuf object per span, attribute and value from a
``ReadableSpan``: about 44 µs per span, in a thread that shares the GIL with the
event loop. The hub's spans carry only string, boolean, integer and float
attributes it set itself, so this module writes the protobuf wire format straight
from :class:`~mcp_hub.telemetry.record.SpanRecord` (field numbers of
opentelemetry/proto/trace/v1/trace.proto), with each ``key = value`` pair encoded
once and reused. The tests decode the result with ``opentelemetry-proto``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_hub.telemetry.record import SpanRecord

__all__ = ["encode_request"]

_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack
_KV_CACHE_MAX = 20_000
_kv_cache: dict[tuple[str, type, Any], bytes] = {}
#: Attributes whose values rarely repeat: encoded every time, never cached.
_UNCACHED = frozenset(("jsonrpc.request.id", "mcp.progress", "mcp.progress.total"))


def _varint(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _any_value(value: Any) -> bytes:
    if isinstance(value, str):
        return _field(1, value.encode("utf-8", "replace"))
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x18" + _varint(value & 0xFFFFFFFFFFFFFFFF)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    return _field(1, str(value).encode("utf-8", "replace"))


def _key_value(key: str, value: Any) -> bytes:
    """A ``KeyValue`` message (cached per pair, request ids aside)."""
    if key in _UNCACHED:
        return _field(1, key.encode("utf-8", "replace")) + _field(2, _any_value(value))
    cache_key = (key, type(value), value)
    try:
        cached = _kv_cache.get(cache_key)
    except TypeError:  # an unhashable value
        return _field(1, key.encode("utf-8", "replace")) + _field(2, _any_value(value))
    if cached is None:
        cached = _field(1, key.encode("utf-8", "replace")) + _field(2, _any_value(value))
        if len(_kv_cache) >= _KV_CACHE_MAX:
            _kv_cache.clear()
        _kv_cache[cache_key] = cached
    return cached


def _attributes(number: int, attrs: Mapping[str, Any]) -> bytes:
    return b"".join(_field(number, _key_value(k, v)) for k, v in attrs.items())


_times = struct.Struct("<BQBQ").pack  # start_time_unix_nano (7) and end_time_unix_nano (8)
_STATIC_CACHE_MAX = 10_000
#: (name, kind, attributes but the uncached ones) -> their encoded fields 5, 6 and 9.
_static_cache: dict[tuple[Any, ...], bytes] = {}


def _static(rec: SpanRecord) -> bytes:
    """Name, kind and the attributes every span of its kind shares, encoded once per kind.

    Protobuf fields may come in any order, so the uncached attributes (request ids,
    progress values) follow as further field-9 entries (:func:`_span`).
    """
    items = tuple(kv for kv in rec.attrs.items() if kv[0] not in _UNCACHED)
    key = (rec.name, rec.kind, items)
    try:
        cached = _static_cache.get(key)
    except TypeError:  # an unhashable attribute value: encoded every time
        return _encode_static(rec.name, rec.kind, items)
    if cached is None:
        cached = _encode_static(rec.name, rec.kind, items)
        if len(_static_cache) >= _STATIC_CACHE_MAX:
            _static_cache.clear()
        _static_cache[key] = cached
    return cached


def _encode_static(name: str, kind: int, items: Iterable[tuple[str, Any]]) -> bytes:
    # OTLP span kinds: INTERNAL 1, SERVER 2, CLIENT 3.
    return (_field(5, name.encode("utf-8", "replace")) + b"\x30" + _varint(kind + 1)
            + b"".join(_field(9, _key_value(k, v)) for k, v in items))


def _span(rec: SpanRecord) -> bytes:
    parts = [b"\x0a\x10", rec.trace_id.to_bytes(16, "big"), b"\x12\x08",
             rec.span_id.to_bytes(8, "big")]
    if rec.tracestate:
        parts.append(_field(3, rec.tracestate.encode("utf-8", "replace")))
    if rec.parent_id:
        parts += (b"\x22\x08", rec.parent_id.to_bytes(8, "big"))
    parts.append(_times(0x39, rec.start, 0x41, rec.end))
    parts.append(_static(rec))
    for key, value in rec.attrs.items():
        if key in _UNCACHED:
            parts.append(_field(9, _key_value(key, value)))
    for name, ts, attrs in rec.events or ():
        parts.append(_field(11, b"\x09" + _fixed64(ts) + _field(2, name.encode("utf-8"))
                            + _attributes(3, attrs)))
    for trace_id, span_id in rec.links or ():
        parts.append(_field(13, _field(1, trace_id.to_bytes(16, "big"))
                            + _field(2, span_id.to_bytes(8, "big")) + b"\x35\x01\x00\x00\x00"))
    if rec.error is not None:
        message = _field(2, rec.message.encode("utf-8", "replace")) if rec.message else b""
        parts.append(_field(15, message + b"\x18\x02"))  # STATUS_CODE_ERROR
    # flags (field 16, fixed32): sampled, "is remote" known, and whether the parent is remote
    parts.append(b"\x85\x01\x01\x03\x00\x00" if rec.remote_parent else b"\x85\x01\x01\x01\x00\x00")
    return b"".join(parts)


def encode_request(records: Iterable[SpanRecord], resource: Mapping[str, Any], scope: str,
                   scope_version: str) -> bytes:
    """One ``ExportTraceServiceRequest`` with ``records`` under one resource and scope."""
    scope_msg = _field(1, scope.encode()) + _field(2, scope_version.encode())
    spans = b"".join(_field(2, _span(rec)) for rec in records)
    resource_msg = _attributes(1, resource)
    return _field(1, _field(1, resource_msg) + _field(2, _field(1, scope_msg) + spans))
