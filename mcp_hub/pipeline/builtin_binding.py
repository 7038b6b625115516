"""Builtin tools, declared once, bound to one Hub's :class:`~mcp_hub.pipeline.runtime.Runtime`.

Builtin tool modules declare their tools at import time into the module-level
``registry`` of :mod:`mcp_hub.registry.tool_registry`, which serves nothing: it is the table
of declarations. Each Hub registers fresh entries made from those declarations
into its own registry, with the handler, ``check_fn`` and schema overrides
bound to the Hub's Runtime, so a builtin reads the config of the Hub it runs in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from mcp_hub.pipeline.runtime import Runtime, bind
from mcp_hub.registry.entry import ToolEntry, is_async_callable

__all__ = ["bound_builtins"]


def bound_builtins(declared: Iterable[ToolEntry], runtime: Runtime) -> list[ToolEntry]:
    """New entries for the ``builtin``-origin declarations, bound to ``runtime``.

    One function shared by several tools (a common ``check_fn``) stays one bound
    function, so the registry still probes it once per pass.
    """
    memo: dict[int, Callable[..., Any]] = {}

    def bound(fn: Callable[..., Any], is_async: bool) -> Callable[..., Any]:
        key = id(fn)
        if key not in memo:
            memo[key] = bind(runtime, fn, is_async=is_async)
        return memo[key]

    entries: list[ToolEntry] = []
    for e in declared:
        if e.origin != "builtin":
            continue
        entries.append(ToolEntry(
            e.name, e.toolset, e.schema,
            bound(e.handler, e.is_async or is_async_callable(e.handler)),
            check_fn=None if e.check_fn is None else bound(e.check_fn, is_async_callable(e.check_fn)),
            requires_env=e.requires_env, is_async=e.is_async, description=e.description,
            emoji=e.emoji, max_result_size_chars=e.max_result_size_chars,
            dynamic_schema_overrides=None if e.dynamic_schema_overrides is None
            else bound(e.dynamic_schema_overrides, False),
            origin=e.origin,
        ))
    return entries
