"""Small checks on raw (already JSON-decoded) JSON-RPC messages, shared by the transports.

The hub answers some messages itself before the SDK sees them (the stdio fast
path, malformed requests on stdio and HTTP); all of them agree here on what
counts as a request with an id that may be answered.
"""

from __future__ import annotations

from typing import Any

__all__ = ["INVALID_ID", "PARSE_TOO_DEEP", "has_invalid_id", "is_request_id", "request_id_of"]

#: The answer to a request whose ``id`` is neither a string nor an integer (1.5, 1e400,
#: null, true, an object): JSON-RPC's Invalid Request, with a null id since the given
#: one cannot be echoed. Without it such a message would pass for a notification.
INVALID_ID: dict[str, Any] = {
    "jsonrpc": "2.0", "id": None,
    "error": {"code": -32600, "message": "Invalid Request: id must be a string or an integer"},
}

#: The answer to JSON nested deeper than the parser's recursion limit.
PARSE_TOO_DEEP: dict[str, Any] = {
    "jsonrpc": "2.0", "id": None,
    "error": {"code": -32700, "message": "Parse error: JSON nested too deeply"},
}


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


def has_invalid_id(raw: Any) -> bool:
    """A message with a ``method`` and an ``id`` member that is not a usable request id."""
    if isinstance(raw, list):
        return any(has_invalid_id(item) for item in raw)
    return isinstance(raw, dict) and "method" in raw and "id" in raw and not is_request_id(raw["id"])
