"""One registered tool (:class:`ToolEntry`) and a refused registration (:class:`Rejection`).

Imports nothing of the project but :mod:`mcp_hub.registry.naming` (what an upstream toolset is called).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_hub.registry.naming import is_upstream_toolset

__all__ = ["CheckFn", "Handler", "Origin", "Rejection", "SchemaOverrides", "ToolEntry",
           "default_origin", "input_schema_of", "is_async_callable"]

Origin = Literal["builtin", "plugin", "upstream"]
Handler = Callable[..., Any]
CheckFn = Callable[[], Any]
SchemaOverrides = Callable[[], Mapping[str, Any] | None]

_EMPTY_INPUT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class ToolEntry:
    """One registered tool. ``__slots__`` keeps 10k upstream tools cheap."""

    __slots__ = (
        "check_fn",
        "description",
        "dynamic_schema_overrides",
        "emoji",
        "handler",
        "is_async",
        "max_result_size_chars",
        "name",
        "origin",
        "requires_env",
        "schema",
        "toolset",
    )

    def __init__(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Handler,
        check_fn: CheckFn | None = None,
        requires_env: list[str] | None = None,
        is_async: bool = False,
        description: str = "",
        emoji: str = "",
        max_result_size_chars: int | None = None,
        dynamic_schema_overrides: SchemaOverrides | None = None,
        origin: Origin = "builtin",
    ) -> None:
        self.name = name
        self.toolset = toolset
        self.schema = schema
        self.handler = handler
        self.check_fn = check_fn
        self.requires_env = requires_env
        self.is_async = is_async
        self.description = description
        self.emoji = emoji
        self.max_result_size_chars = max_result_size_chars
        self.dynamic_schema_overrides = dynamic_schema_overrides
        self.origin: Origin = origin

    def __repr__(self) -> str:
        return f"ToolEntry(name={self.name!r}, toolset={self.toolset!r}, origin={self.origin!r})"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A registration refused because another toolset holds the name."""

    name: str
    toolset: str
    holder_toolset: str
    reason: str
    time: float = field(default_factory=time.time)


def input_schema_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, MCP style or OpenAI style."""
    value = schema.get("inputSchema", schema.get("parameters"))
    return value if isinstance(value, dict) else _EMPTY_INPUT_SCHEMA


def is_async_callable(fn: Handler) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on instances
    return call is not None and inspect.iscoroutinefunction(call)


def default_origin(toolset: str) -> Origin:
    return "upstream" if is_upstream_toolset(toolset) else "builtin"
