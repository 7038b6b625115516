"""The trace context written into an upstream request's ``_meta`` reaches the wire.

:func:`mcp_hub.telemetry.meta.write_meta` writes a new ``_meta`` straight into
the request model's ``__dict__`` (pydantic's validating ``__setattr__`` costs a
few µs per call); these tests pin that the result serialises exactly as an
ordinary assignment would, for requests with and without a ``_meta`` of their own.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.types import CallToolRequest, CallToolRequestParams, ReadResourceRequest, ReadResourceRequestParams

from mcp_hub.telemetry.meta import pass_meta, write_meta
from mcp_hub.telemetry.record import Sampler, SpanRecord, parse_traceparent


def _record(tracestate: str | None = None) -> SpanRecord:
    parent = parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", tracestate)
    return SpanRecord.root("tools/call echo", 2, {}, parent, Sampler(1.0))


def _wire(request: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = request.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped


@pytest.mark.parametrize("tracestate", [None, "vendor=1"])
def test_a_request_without_meta_gets_one_that_serialises(tracestate: str | None) -> None:
    rec = _record(tracestate)
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={"text": "hi"}))
    write_meta(request.params, rec)
    meta = _wire(request)["params"]["_meta"]
    assert meta["traceparent"] == rec.traceparent()
    assert parse_traceparent(meta["traceparent"]).trace_id == rec.trace_id  # type: ignore[union-attr]
    assert meta.get("tracestate") == tracestate
    assert "meta" in request.params.model_fields_set
    # The same as pydantic's own assignment would give.
    expected = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={"text": "hi"}))
    expected.params.meta = {"traceparent": rec.traceparent(),
                            **({"tracestate": tracestate} if tracestate else {})}
    assert _wire(request) == _wire(expected)


def test_a_request_with_meta_keeps_it_and_gains_the_context() -> None:
    rec = _record()
    params = CallToolRequestParams(name="echo", arguments={}, _meta={"progressToken": 7})
    request = CallToolRequest(params=params)
    write_meta(request.params, rec)
    meta = _wire(request)["params"]["_meta"]
    assert meta["progressToken"] == 7 and meta["traceparent"] == rec.traceparent()


def test_other_request_types_and_plain_objects_get_it_too() -> None:
    rec = _record()
    read = ReadResourceRequest(params=ReadResourceRequestParams(uri="echo://hello"))
    write_meta(read.params, rec)
    assert _wire(read)["params"]["_meta"] == {"traceparent": rec.traceparent()}

    class Plain:
        """Not a pydantic model: the ordinary assignment is used."""

        meta: Any = None

    plain = Plain()
    write_meta(plain, rec)
    assert plain.meta == {"traceparent": rec.traceparent()}


CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_callers_context_passes_on_unchanged_and_nothing_else() -> None:
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": CALLER, "tracestate": "vendor=1", "progressToken": 3,
                               "private": "stays"})
    assert _wire(request)["params"]["_meta"] == {"traceparent": CALLER, "tracestate": "vendor=1"}


@pytest.mark.parametrize("meta", [None, {}, {"progressToken": 1}, {"traceparent": "00-zz-zz-01"},
                                  {"traceparent": 7}, "00-x", ["traceparent"]])
def test_no_or_a_malformed_context_passes_nothing(meta: Any) -> None:
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, meta)
    assert "_meta" not in _wire(request)["params"]


def test_the_upstream_requests_own_meta_is_kept() -> None:
    params = CallToolRequestParams(name="echo", arguments={}, _meta={"progressToken": 7})
    request = CallToolRequest(params=params)
    pass_meta(request.params, {"traceparent": CALLER})
    assert _wire(request)["params"]["_meta"] == {"progressToken": 7, "traceparent": CALLER}


@pytest.mark.parametrize("parent", [None, CALLER, CALLER[:-2] + "00"])
def test_traceparent_names_the_trace_and_the_span(parent: str | None) -> None:
    sampler = Sampler(1.0)
    root = SpanRecord.root("tools/call echo", 1, {}, parse_traceparent(parent), sampler)
    child = root.child("tools/call echo", 2, {})
    for rec in (root, child, root):  # formatted more than once, alike
        version, trace_hex, span_hex, flags = rec.traceparent().split("-")
        assert (version, int(trace_hex, 16), int(span_hex, 16)) == ("00", rec.trace_id, rec.span_id)
        assert len(trace_hex) == 32 and len(span_hex) == 16
        assert flags == ("00" if parent and parent.endswith("-00") else "01")
    if parent is not None:
        assert root.trace_id == int(parent.split("-")[1], 16)


@pytest.mark.parametrize("value", [CALLER + "\n", CALLER + "\r\n", "x" + CALLER,
                                   "01-" + CALLER[3:] + "-" + "f" * 300])
def test_a_newline_garbage_or_an_overlong_traceparent_passes_nothing(value: str) -> None:
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": value})
    assert "_meta" not in _wire(request)["params"]
    assert parse_traceparent(value) is None


def test_spaces_around_are_dropped_and_a_long_tracestate_is_not_passed() -> None:
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": f" \t{CALLER}\t ", "tracestate": "k=" + "v" * 600})
    assert _wire(request)["params"]["_meta"] == {"traceparent": CALLER}
    later = "cc-" + CALLER[3:] + "-extra"  # a later version, with a field appended
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": later, "tracestate": "k=v"})
    assert _wire(request)["params"]["_meta"] == {"traceparent": later, "tracestate": "k=v"}


def test_a_new_trace_formats_its_head_once_for_all_its_children() -> None:
    root = SpanRecord.root("tools/call echo", 1, {}, None, Sampler(1.0))
    first, second = root.child("a", 2, {}), root.child("b", 2, {})
    assert first.head is second.head is root.head
    assert root.head == f"00-{root.trace_id:032x}-"


def test_the_http_headers_context_passes_when_meta_has_none() -> None:
    from starlette.datastructures import Headers

    headers = Headers(raw=[(b"host", b"hub"), (b"traceparent", CALLER.encode()),
                           (b"tracestate", b"k=v")])
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"progressToken": 1}, headers)
    assert _wire(request)["params"]["_meta"] == {"traceparent": CALLER, "tracestate": "k=v"}
    # _meta's own context comes first, as when the hub traces.
    other = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": other}, headers)
    assert _wire(request)["params"]["_meta"] == {"traceparent": other}
    # A malformed one in _meta falls back to the headers'.
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, {"traceparent": "00-bad"}, headers)
    assert _wire(request)["params"]["_meta"]["traceparent"] == CALLER
    request = CallToolRequest(params=CallToolRequestParams(name="echo", arguments={}))
    pass_meta(request.params, None, Headers(raw=[(b"host", b"hub")]))
    assert "_meta" not in _wire(request)["params"]
