"""Small checks on raw (already JSON-decoded) JSON-RPC messages, shared by the transports.

The hub answers some messages itself before the SDK sees them (the stdio fast
path, malformed requests on stdio and HTTP); all of them agree here on what
counts as a request with an id that may be answered.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_request_id", "request_id_of"]


def is_request_id(value: Any) -> bool:
    """A JSON-RPC id the hub can answer: a string or an integer (not a bool)."""
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def request_id_of(raw: Any) -> str | int | None:
    """The id of a JSON-RPC 2.0 request (``jsonrpc``, a string ``method``, a usable id), else None."""
    if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0" or not isinstance(raw.get("method"), str):
        return None
    rid = raw.get("id")
    if not is_request_id(rid):
        return None
    assert isinstance(rid, (str, int))
    return rid
