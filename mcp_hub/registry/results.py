"""Tool results: building them, normalising a handler's return value, sanitising errors.

Imports nothing of the project: tools, the registry and the pipeline all use it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mcp.types import CallToolResult, TextContent

__all__ = ["MAX_ERROR_CHARS", "normalize_result", "sanitize_tool_error", "tool_error",
           "tool_result"]

MAX_ERROR_CHARS = 2000

_SANITIZE_PATTERNS = (
    re.compile(r"<!\[CDATA\[|\]\]>"),
    re.compile(r"```[A-Za-z0-9_+-]*(?=\s)|```"),
    re.compile(
        r"</?\s*(?:antml:)?(?:tool_call|tool_calls|tool_use|tool_result|tool_response|"
        r"function_calls?|function_results?|invoke|parameter|arguments|"
        r"result|output|system|assistant|user)\b[^>]*>",
        re.IGNORECASE,
    ),
    re.compile(r"<\|[^|>]{0,40}\|>"),
)


def sanitize_tool_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Strip tool-call-like tags, code fences and CDATA from an error; cap its length."""
    for pattern in _SANITIZE_PATTERNS:
        text = pattern.sub("", text)
    text = text.strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def tool_result(
    data: Any = None,
    *,
    text: str | None = None,
    structured: Any = None,
    is_error: bool = False,
) -> CallToolResult:
    """Build a ``CallToolResult``: ``text`` verbatim, else ``data`` (str as is, others as JSON).

    A dict ``data`` also becomes ``structuredContent`` unless ``structured`` is given.
    """
    if text is None:
        if data is None:
            text = ""
        elif isinstance(data, str):
            text = data
        else:
            text = json.dumps(data, ensure_ascii=False, default=str)
    if structured is None and isinstance(data, dict):
        structured = data
    return CallToolResult(
        content=[TextContent(text=text)], structured_content=structured, is_error=is_error
    )


def tool_error(msg: str, **extra: Any) -> CallToolResult:
    """An ``isError`` result whose text is the JSON object ``{"error": msg, **extra}``."""
    payload = {"error": msg, **extra}
    return CallToolResult(
        content=[TextContent(text=json.dumps(payload, ensure_ascii=False, default=str))],
        is_error=True,
    )


def normalize_result(value: Any) -> CallToolResult:
    """A handler's return value as a ``CallToolResult`` (str, JSON-able value or result)."""
    if isinstance(value, CallToolResult):
        return value
    if isinstance(value, str):
        return CallToolResult(content=[TextContent(text=value)])
    if value is None:
        return CallToolResult(content=[])
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(value)
    structured = value if isinstance(value, dict) else None
    return CallToolResult(content=[TextContent(text=text)], structured_content=structured)
