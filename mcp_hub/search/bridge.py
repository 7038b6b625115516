"""The bridge tools' behaviour: ``tool_search``, ``tool_describe``, ``tool_call``.

:class:`ToolSearchBridge` fits the call pipeline's bridge protocol
(``handles(name)``, ``await handle(name, args, reenter, **context)``). It reads
the deferred catalog from a provider at call time, so a tool that appeared after
the client last listed is still found and callable. ``tool_call`` re-enters the
pipeline with the real name: validation, hooks and the size cap see the real tool.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from mcp.types import CallToolResult, TextContent

from mcp_hub.protocol.apps import is_app_only, is_ui_tool
from mcp_hub.search.exposure import (
    BRIDGE_NAMES,
    MAX_DESCRIBE,
    MAX_QUERIES,
    TOOL_DESCRIBE,
    TOOL_SEARCH,
    SettingsLike,
    ToolSearchSettings,
    bridge_definitions,
    estimate_tokens,
    is_deferrable,
    server_label,
    threshold_tokens,
)
from mcp_hub.search.grouping import group_matches
from mcp_hub.search.ranking import (
    DEFAULT_WEIGHTS,
    Match,
    RankingWeights,
    SearchIndex,
    ToolDoc,
)
from mcp_hub.search.semantic import HybridIndex, engine_for

__all__ = ["CatalogProvider", "Reenter", "ToolSearchBridge"]

#: Returns (deferrable tool definitions, tool name -> server label, registry generation).
CatalogProvider = Callable[[], tuple[Sequence[Mapping[str, Any]], Mapping[str, str], Hashable]]


class Reenter(Protocol):
    """The pipeline, entered again for the real tool."""

    def __call__(self, real_name: str, real_args: dict[str, Any], **context: Any) -> Awaitable[CallToolResult]: ...


@dataclass(frozen=True)
class _Catalog:
    by_name: dict[str, Mapping[str, Any]]
    servers: Mapping[str, str]
    index: SearchIndex | HybridIndex
    by_lower: dict[str, list[str]]
    by_raw: dict[str, list[str]]
    tokens: int
    #: App-only tools (MCP Apps ``visibility`` without "model"): never run by ``tool_call``.
    app_only: frozenset[str] = frozenset()
    #: MCP Apps tools the model may see (listed beside the bridge, never searched):
    #: ``tool_describe`` describes them, ``_meta.ui`` included.
    ui_tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class ToolSearchBridge:
    """Progressive disclosure behind three tools, independent of the transport.

    ``provider`` returns the tools the bridge may search and call — every
    deferrable tool the registry holds now (the hub passes its registry's
    upstream and plugin definitions) — with their server labels and a key that
    changes whenever they do (the registry's availability key: its generation
    and the check_fn results). The search index is
    built once per key, in a worker thread when a call needs it.
    """

    def __init__(
        self,
        settings: SettingsLike | None,
        provider: CatalogProvider,
        *,
        weights: RankingWeights = DEFAULT_WEIGHTS,
    ) -> None:
        self.settings: SettingsLike = settings if settings is not None else ToolSearchSettings()
        self._provider = provider
        self._weights = weights
        self._lock = threading.Lock()
        self._current: tuple[Hashable, _Catalog] | None = None
        self._tokens: dict[Hashable, int] = {}

    # ------------------------------------------------------------------ state
    def _state(self) -> tuple[Hashable, Sequence[Mapping[str, Any]], Mapping[str, str]]:
        definitions, servers, generation = self._provider()
        # The provider's key changes with every registry mutation and check_fn flip, so it (with the
        # settings that filter the catalog) identifies the catalog without
        # looking at 10,000 definitions on every call.
        key = (generation, len(definitions), tuple(self.settings.always_visible))
        return key, definitions, servers

    def _build(self, key: Hashable, definitions: Sequence[Mapping[str, Any]], servers: Mapping[str, str]) -> _Catalog:
        with self._lock:  # may run in a worker thread; build each catalog once
            if self._current is not None and self._current[0] == key:
                return self._current[1]
            # Pinned tools (always_visible, alwaysLoad) stay listed, so they are not
            # part of the bridge's catalog even if the provider hands them over.
            defs = [d for d in definitions if is_deferrable(d, "upstream", self.settings)]
            names = [str(d.get("name", "")) for d in defs]
            lexical = SearchIndex.build(
                (ToolDoc.from_definition(d, server_label(n, servers)) for n, d in zip(names, defs, strict=True)),
                self._weights,
            )
            index = engine_for(self.settings).index(lexical)
            by_lower: dict[str, list[str]] = {}
            by_raw: dict[str, list[str]] = {}
            for doc in index.docs:
                by_lower.setdefault(doc.name.lower(), []).append(doc.name)
                by_raw.setdefault(doc.raw_name.lower(), []).append(doc.name)
            cat = _Catalog(
                by_name=dict(zip(names, defs, strict=True)),
                servers=dict(servers),
                index=index,
                by_lower=by_lower,
                by_raw=by_raw,
                tokens=estimate_tokens(defs),
                app_only=frozenset(str(d.get("name", "")) for d in definitions if is_app_only(d)),
                ui_tools={str(d.get("name", "")): d for d in definitions
                          if is_ui_tool(d) and not is_app_only(d)},
            )
            self._current = (key, cat)
            return cat

    def _catalog(self) -> _Catalog:
        """The catalog for the registry as it is now (built here on a miss)."""
        key, definitions, servers = self._state()
        current = self._current
        if current is not None and current[0] == key:
            return current[1]
        return self._build(key, definitions, servers)

    async def _catalog_async(self) -> _Catalog:
        """Same, with a miss built in a worker thread: 10,000 tools take a second or two."""
        key, definitions, servers = self._state()
        current = self._current
        if current is not None and current[0] == key:
            return current[1]
        return await anyio.to_thread.run_sync(self._build, key, definitions, servers)

    def is_active(self) -> bool:
        """Whether the bridge tools are listed (and so handled) right now."""
        mode = self.settings.mode
        if mode == "on":
            return True
        if mode == "off":
            return False
        key, definitions, _ = self._state()
        tokens = self._tokens.get(key)
        if tokens is None:
            pinned_out = [d for d in definitions if is_deferrable(d, "upstream", self.settings)]
            tokens = estimate_tokens(pinned_out) if pinned_out else -1
            self._tokens = {key: tokens}
        return tokens >= 0 and tokens >= threshold_tokens(self.settings)

    def handles(self, name: str) -> bool:
        """True for the three bridge names while the bridge is active."""
        return name in BRIDGE_NAMES and self.is_active()

    def search(self, query: str, limit: int | None = None) -> list[Match]:
        """Ranked matches for ``query`` in the current catalog."""
        return self._catalog().index.search(query, self._limit(limit))

    def definitions_when_active(self, definitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """What ``tools/list`` would hold with bridging on: ``definitions`` minus the
        deferred catalog, plus the bridge tools (for token reports)."""
        cat = self._catalog()
        kept = [dict(d) for d in definitions if str(d.get("name")) not in cat.by_name]
        return kept + bridge_definitions(list(cat.by_name.values()), cat.servers, self.settings)

    # ------------------------------------------------------------------ calls
    async def handle(
        self, name: str, args: Mapping[str, Any] | None, reenter: Reenter, **context: Any
    ) -> CallToolResult:
        """Run bridge tool ``name``; argument problems are ``isError`` results."""
        args = dict(args or {})
        if name not in BRIDGE_NAMES:
            return _error(f"{name} is not a bridge tool")
        cat = await self._catalog_async()
        if name == TOOL_SEARCH:
            return self._tool_search(cat, args)
        if name == TOOL_DESCRIBE:
            return self._tool_describe(cat, args)
        return await self._tool_call(cat, args, reenter, context)

    def _limit(self, value: Any) -> int:
        max_limit = max(1, self.settings.max_limit)
        if value is None:
            return min(max(1, self.settings.default_limit), max_limit)
        limit = _as_int(value)
        if limit is None:
            raise ValueError(f"limit must be an integer from 1 to {max_limit}")
        return min(max(1, limit), max_limit)

    def _tool_search(self, cat: _Catalog, args: dict[str, Any]) -> CallToolResult:
        queries = _as_strings(args.get("queries"))
        query = args.get("query")
        if isinstance(query, str) and query.strip():
            queries = [query, *(q for q in queries if q != query)]
        queries = [q for q in queries if q.strip()]
        if not queries:
            return _error("tool_search needs `query` (a string) or `queries` (a list of strings)")
        if len(queries) > MAX_QUERIES:
            return _error(f"tool_search takes at most {MAX_QUERIES} queries, got {len(queries)}")
        try:
            limit = self._limit(args.get("limit"))
        except ValueError as exc:
            return _error(str(exc))
        results = []
        for q in queries:
            # A few more than asked, so that near-duplicates folded into a group
            # leave room for distinct answers.
            matches = group_matches(cat.index.search(q, limit * 3), limit)
            entry: dict[str, Any] = {"query": q, "matches": matches}
            if not matches:
                entry["sources"] = _sources(cat)
                entry["hint"] = (
                    "No tool matched. Try other words for what the tool does "
                    '(e.g. "send a message", "list files"), add a server name from '
                    "sources, or pass an exact name to tool_describe."
                )
            results.append(entry)
        return _json_result({"results": results})

    def _resolve(self, cat: _Catalog, name: str) -> list[str]:
        """Exposed names ``name`` may mean: exact, then case-insensitive, then raw name."""
        if name in cat.by_name:
            return [name]
        key = name.strip().lower()
        return cat.by_lower.get(key) or cat.by_raw.get(key) or []

    def _tool_describe(self, cat: _Catalog, args: dict[str, Any]) -> CallToolResult:
        names = _as_strings(args.get("names", args.get("name")))
        if not names:
            return _error("tool_describe needs `names`: a list of tool names from tool_search")
        if len(names) > MAX_DESCRIBE:
            return _error(f"tool_describe takes at most {MAX_DESCRIBE} names, got {len(names)}")
        tools: list[dict[str, Any]] = []
        not_found: list[dict[str, Any]] = []
        for n in names:
            found = self._resolve(cat, n)
            if not found and n in cat.ui_tools:
                found = [n]
            if len(found) != 1:
                not_found.append({"name": n, "close": found or _close(cat, n)})
                continue
            d = cat.by_name.get(found[0]) or cat.ui_tools[found[0]]
            described: dict[str, Any] = {
                "name": found[0],
                "server": server_label(found[0], cat.servers),
                "description": str(d.get("description") or ""),
                "inputSchema": d.get("inputSchema") or {"type": "object"},
            }
            for extra in ("title", "annotations", "outputSchema", "execution"):
                if d.get(extra):
                    described[extra] = d[extra]
            meta = d.get("_meta")
            if isinstance(meta, Mapping) and isinstance(meta.get("ui"), Mapping):
                described["_meta"] = {"ui": meta["ui"]}  # an MCP Apps tool: its app
            tools.append(described)
        out: dict[str, Any] = {"tools": tools}
        if not_found:
            out["not_found"] = not_found
        return _json_result(out)

    async def _tool_call(
        self, cat: _Catalog, args: dict[str, Any], reenter: Reenter, context: dict[str, Any]
    ) -> CallToolResult:
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            return _error("tool_call needs `name`: the exact tool name from tool_search")
        if name.strip() in BRIDGE_NAMES:
            return _error(f"tool_call cannot run the bridge tool {name.strip()}; call it directly")
        arguments = args.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                return _error("tool_call `arguments` must be a JSON object")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _error(f"tool_call `arguments` must be an object, not {type(arguments).__name__}")
        found = self._resolve(cat, name)
        if len(found) > 1:
            return _error(f"{name} is ambiguous; use one of: {', '.join(sorted(found))}")
        # A name outside the catalog (a listed tool, or none at all) goes to the
        # pipeline unchanged: it owns "unknown tool" and every other check.
        real = found[0] if found else name
        if real in cat.app_only:
            return _error(f"{real} is for its app only (MCP Apps visibility); the host calls it")
        return await reenter(real, arguments, **context)


def _sources(cat: _Catalog) -> list[dict[str, Any]]:
    counts: dict[str, int] = {}
    for n in cat.by_name:
        label = server_label(n, cat.servers)
        counts[label] = counts.get(label, 0) + 1
    return [{"server": s, "tools": counts[s]} for s in sorted(counts)]


def _close(cat: _Catalog, name: str) -> list[str]:
    by_lower = {n.lower(): n for n in cat.by_name}
    hits = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)
    if not hits:
        raw = {d.raw_name.lower(): d.name for d in cat.index.docs}
        return [raw[h] for h in difflib.get_close_matches(name.lower(), list(raw), n=3)]
    return [by_lower[h] for h in hits]


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _as_strings(value: Any) -> list[str]:
    """A list of strings from a list, a JSON-encoded list or a single string."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                return [value]
        else:
            return [value] if text else []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()]
    return []


def _json_result(payload: Mapping[str, Any]) -> CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
