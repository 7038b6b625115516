"""Toolsets: named groups of tools that profiles expose or hide.

Three kinds:

* static builtin toolsets (:data:`TOOLSETS`), one per family of builtin tools;
* composite toolsets from config (``tools`` + ``includes``), added with
  :meth:`Toolsets.register_composite` — each Hub has its own :class:`Toolsets`,
  so one hub's composites never show in another's;
* registry-only toolsets such as ``mcp-<server>``: any toolset name the registry
  knows resolves to the registry's tools of that toolset.

:func:`resolve_toolset` follows ``includes`` recursively. A toolset reached twice
(diamond) or through a cycle contributes nothing the second time — never an
error, never a hang. ``all`` and ``*`` mean every tool.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import TypedDict

from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.registry.tool_registry import registry as default_registry

__all__ = [
    "ALL_ALIASES",
    "TOOLSETS",
    "ToolsetSpec",
    "Toolsets",
    "reached_toolsets",
    "register_composite",
    "resolve_profile",
    "resolve_toolset",
    "unregister_composite",
]

ALL_ALIASES = frozenset({"all", "*"})


class ToolsetSpec(TypedDict):
    description: str
    tools: list[str]
    includes: list[str]


#: Builtin toolsets. Composite toolsets from config are added at runtime.
TOOLSETS: dict[str, ToolsetSpec] = {
    "hub": {
        "description": "The hub's own status: upstream servers, rejected tools, tool_search state.",
        "tools": ["hub_status"],
        "includes": [],
    },
    "clarify": {
        "description": "Ask the calling client's user a question through MCP elicitation.",
        "tools": ["clarify"],
        "includes": [],
    },
    "file": {
        "description": "Read, write and search files under the configured roots.",
        "tools": ["read_file", "write_file", "search_files"],
        "includes": [],
    },
    "terminal": {
        "description": "Run shell commands in a configured working directory.",
        "tools": ["terminal"],
        "includes": [],
    },
}

_BUILTIN_NAMES = frozenset(TOOLSETS)


class Toolsets:
    """One table of toolsets: the builtin ones plus composites (see the module docstring).

    ``table`` defaults to a fresh copy of the builtin toolsets; the module-level
    functions below use the process-wide :data:`TOOLSETS` (tools and tests that
    have no Hub).
    """

    def __init__(self, table: dict[str, ToolsetSpec] | None = None) -> None:
        if table is None:
            table = {name: {"description": spec["description"], "tools": list(spec["tools"]),
                            "includes": list(spec["includes"])}
                     for name, spec in TOOLSETS.items() if name in _BUILTIN_NAMES}
        self._table = table
        self._lock = threading.Lock()

    def register_composite(
        self, name: str, tools: Iterable[str], includes: Iterable[str], description: str = ""
    ) -> None:
        """Define (or redefine) a composite toolset, typically from ``servers.toml``.

        Builtin toolsets and the ``all``/``*`` aliases cannot be redefined.
        """
        if name in ALL_ALIASES or name in _BUILTIN_NAMES:
            raise ValueError(f"toolset {name!r} is reserved and cannot be redefined")
        spec: ToolsetSpec = {
            "description": description,
            "tools": list(tools),
            "includes": list(includes),
        }
        with self._lock:
            self._table[name] = spec

    def unregister_composite(self, name: str) -> bool:
        """Remove a composite toolset (config reload); builtin toolsets stay."""
        if name in _BUILTIN_NAMES:
            return False
        with self._lock:
            return self._table.pop(name, None) is not None

    def snapshot(self) -> dict[str, ToolsetSpec]:
        with self._lock:
            return dict(self._table)

    def resolve_toolset(self, name: str, registry: ToolRegistry | None = None) -> set[str]:
        """Every tool name in toolset ``name``, following ``includes`` recursively.

        Names come from the static/composite definition and from the registry's tools
        registered under that toolset (so ``mcp-time`` resolves to the time server's
        tools). Unknown toolsets resolve to the empty set.
        """
        reg = default_registry if registry is None else registry
        by_toolset = reg.toolsets()
        table = self.snapshot()
        if name in ALL_ALIASES:
            return set(reg.names()) | {t for spec in table.values() for t in spec["tools"]}
        tools: set[str] = set()
        visited: set[str] = set()
        stack = [name]
        # Iterative depth-first walk: a toolset visited once is never expanded again,
        # which makes diamonds cheap and cycles terminate.
        while stack:
            current = stack.pop()
            if current in visited:
                continue
            visited.add(current)
            if current in ALL_ALIASES:
                tools.update(self.resolve_toolset(current, reg))
                continue
            tools.update(by_toolset.get(current, ()))
            spec = table.get(current)
            if spec is not None:
                tools.update(spec["tools"])
                stack.extend(reversed(spec["includes"]))
        return tools

    def resolve_profile(
        self, toolsets: list[str], disabled: list[str], registry: ToolRegistry | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> set[str] | None:
        """The tool names a profile exposes, or None for "everything".

        ``toolsets`` empty or containing ``all``/``*`` with nothing disabled means
        everything (None), which lets callers skip name filtering entirely. Disabled
        toolsets are subtracted at the end. ``aliases`` maps the names a profile gives
        tools (its rewrites' ``name``) to the registry's: a toolset may list either.
        """
        everything = not toolsets or any(t in ALL_ALIASES for t in toolsets)
        if everything and not disabled:
            return None

        def resolve(name: str) -> set[str]:
            found = self.resolve_toolset(name, registry)
            return {aliases.get(t, t) for t in found} if aliases else found

        if everything:
            selected = resolve("all")
        else:
            selected = set()
            for ts in toolsets:
                selected |= resolve(ts)
        for ts in disabled:
            selected -= resolve(ts)
        return selected

    def reached_toolsets(self, names: Iterable[str]) -> set[str]:
        """Every toolset name reached from ``names``, following composite ``includes``.

        Used to decide which upstream servers (``mcp-<server>`` toolsets) a profile
        reaches, for the prompts and resources that have no tool name to filter by.
        ``all``/``*`` stay in the result as given; the caller interprets them.
        """
        table = self.snapshot()
        reached: set[str] = set()
        stack = list(names)
        while stack:
            current = stack.pop()
            if current in reached:
                continue
            reached.add(current)
            spec = table.get(current)
            if spec is not None:
                stack.extend(spec["includes"])
        return reached


#: The process-wide table (the builtin toolsets, and composites of code without a Hub).
DEFAULT_TOOLSETS = Toolsets(TOOLSETS)
register_composite = DEFAULT_TOOLSETS.register_composite
unregister_composite = DEFAULT_TOOLSETS.unregister_composite
resolve_toolset = DEFAULT_TOOLSETS.resolve_toolset
resolve_profile = DEFAULT_TOOLSETS.resolve_profile
reached_toolsets = DEFAULT_TOOLSETS.reached_toolsets
