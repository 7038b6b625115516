"""The call logic both fast paths share: one ``tools/call`` in, one JSON-RPC answer out.

The stdio fast path (:mod:`.fastpath`) and the HTTP fast path
(:mod:`.http_fastpath`) differ only in how bytes travel; what a call does is
the same: :meth:`Hub.call_tool` (the pipeline, validation, hooks, size cap,
metrics, drain and access rules), then the per-version shaping the SDK applies
to a ``tools/call`` result. Side traffic of a call (progress, log messages,
server-to-client requests) goes through the one relay context of every
transport (:class:`~.call_context.RelayCallContext`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types.methods as _methods
import pydantic_core
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR

from mcp_hub.hub.access import Caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.pipeline.context import CallContext

__all__ = ["call_message", "encode_message", "error_message"]

logger = logging.getLogger(__name__)


def error_message(rid: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


async def call_message(hub: ServingHub, profile: Caller | str | None, version: str, rid: Any,
                       name: str, arguments: dict[str, Any], call: CallContext) -> dict[str, Any]:
    """Run one call through :meth:`Hub.call_tool`; its JSON-RPC answer (result or error)."""
    try:
        result = await hub.call_tool(name, arguments, call, profile=profile)
        dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        shaped = _methods.serialize_server_result("tools/call", version, dumped)
        return {"jsonrpc": "2.0", "id": rid, "result": shaped}
    except MCPError as exc:
        return {"jsonrpc": "2.0", "id": rid,
                "error": exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
    except Exception:
        logger.exception("tools/call %s failed inside the hub", name)
        return error_message(rid, INTERNAL_ERROR, "Internal error")


def encode_message(message: dict[str, Any]) -> bytes:
    """Compact JSON; text that cannot be encoded (a lone surrogate) is escaped."""
    try:
        return pydantic_core.to_json(message)
    except (ValueError, pydantic_core.PydanticSerializationError):
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "backslashreplace")
