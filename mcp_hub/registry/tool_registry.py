"""The tool registry: every tool the hub can serve, whatever its origin.

A tool is four pieces: a handler, an optional ``check_fn`` (is it available
now?), a JSON schema, and a ``registry.register(...)`` call. Builtin tools,
plugins and upstream MCP servers all land here; the serving side reads
definitions from here and calls through :meth:`ToolRegistry.dispatch`.

Concurrency: every mutation happens under one ``RLock`` and bumps
``generation``; readers copy what they need inside the lock and work on the copy
outside it. Listeners (``add_listener``) learn of each new generation, outside the
lock, so the serving side can emit a debounced ``tools/list_changed``.

The registry's parts live in small modules it re-exports: the entry
(:mod:`mcp_hub.registry.entry`), results and error sanitising
(:mod:`mcp_hub.registry.results`), read-only views (:mod:`mcp_hub.registry.frozen`) and the
definition cache (:mod:`mcp_hub.registry.definitions`). They import nothing of the
project above them (tools import the registry, orchestration imports everything).
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import anyio.to_thread
from mcp.shared.exceptions import MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    URL_ELICITATION_REQUIRED,
    CallToolResult,
    TextContent,
)

from mcp_hub.registry.definitions import CHECK_FN_GRACE_SECONDS, CHECK_FN_TTL_SECONDS, DefinitionCache
from mcp_hub.registry.entry import (
    CheckFn,
    Handler,
    Origin,
    Rejection,
    SchemaOverrides,
    ToolEntry,
    default_origin,
    input_schema_of,
    is_async_callable,
)
from mcp_hub.registry.frozen import FrozenDict, FrozenList
from mcp_hub.registry.results import normalize_result, sanitize_tool_error, tool_error, tool_result

__all__ = [
    "CHECK_FN_GRACE_SECONDS",
    "CHECK_FN_TTL_SECONDS",
    "FrozenDict",
    "FrozenList",
    "Origin",
    "Rejection",
    "ToolEntry",
    "ToolRegistry",
    "input_schema_of",
    "normalize_result",
    "registry",
    "tool_error",
    "tool_result",
]

logger = logging.getLogger(__name__)
#: Errors a tool handler raises that are JSON-RPC answers to the client, not tool failures.
PROTOCOL_ERRORS = frozenset((URL_ELICITATION_REQUIRED, MISSING_REQUIRED_CLIENT_CAPABILITY))


class ToolRegistry:
    """Thread-safe store of :class:`ToolEntry` with a generation counter.

    ``clock`` (monotonic seconds) is injectable so the check_fn cache can be
    tested without sleeping.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._tools: dict[str, ToolEntry] = {}
        self._lock = threading.RLock()
        self._generation = 0
        self._batch_depth = 0
        self._batch_dirty = False
        self._listeners: list[Callable[[int], None]] = []
        self._rejections: dict[tuple[str, str], Rejection] = {}
        #: The one cache of check_fn results and built definitions (mcp_hub.registry.definitions).
        self.definitions = DefinitionCache(self._lock, self._state, clock)
        #: Operator setting: lets a plugin replace an existing tool with override=True.
        self.allow_tool_override: bool = False

    # ── reading ──

    @property
    def generation(self) -> int:
        """Bumped by every mutation (once per batch)."""
        return self._generation

    @property
    def rejections(self) -> list[Rejection]:
        """Registrations refused because a protected tool holds the name (deduplicated)."""
        with self._lock:
            return list(self._rejections.values())

    def get_entry(self, name: str) -> ToolEntry | None:
        # dict.get is atomic under the GIL; no lock needed for a single read.
        return self._tools.get(name)

    def snapshot(self) -> dict[str, ToolEntry]:
        """A consistent copy of name → entry, safe to iterate while others mutate."""
        with self._lock:
            return dict(self._tools)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._tools)

    def toolsets(self) -> dict[str, list[str]]:
        """Toolset → sorted tool names, for every toolset that has a tool."""
        result: dict[str, list[str]] = {}
        for entry in self.snapshot().values():
            result.setdefault(entry.toolset, []).append(entry.name)
        for names in result.values():
            names.sort()
        return result

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def _state(self) -> tuple[int, Mapping[str, ToolEntry]]:
        """(generation, name → entry) for the definition cache; called with the lock held."""
        return self._generation, self._tools

    def add_listener(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(generation)`` after every mutation or batch, outside the lock."""
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[int], None]) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _notify(self, generation: int) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(generation)
            except Exception:
                logger.exception("registry listener %r failed", fn)

    def _mark_changed(self) -> int | None:
        """Record a mutation under the lock; return the generation to announce, if any."""
        if self._batch_depth:
            self._batch_dirty = True
            return None
        self._generation += 1
        return self._generation

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Group mutations: one generation bump and one listener call at the end.

        The lock is held for the whole block, so readers see the state before or
        after the batch, never half of it. Do not await inside the block.
        """
        announce: int | None = None
        with self._lock:
            self._batch_depth += 1
            try:
                yield
            finally:
                self._batch_depth -= 1
                if self._batch_depth == 0 and self._batch_dirty:
                    self._batch_dirty = False
                    self._generation += 1
                    announce = self._generation
        if announce is not None:
            self._notify(announce)

    def register(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Handler,
        check_fn: CheckFn | None = None,
        requires_env: list[str] | None = None,
        is_async: bool | None = None,
        description: str = "",
        emoji: str = "",
        max_result_size_chars: int | None = None,
        dynamic_schema_overrides: SchemaOverrides | None = None,
        override: bool = False,
        origin: Origin | None = None,
    ) -> bool:
        """Register a tool; return False when refused because a protected tool holds the name.

        Conflict policy for a name held by another toolset:

        * both toolsets ``mcp-*``: the newcomer overwrites (MCP over MCP), debug log;
        * a plugin newcomer replaces only with ``override=True`` and
          :attr:`allow_tool_override`, else ``PermissionError``;
        * a builtin holds the name (or a plugin does, against an upstream): the
          newcomer is rejected, logged at ERROR and recorded in :attr:`rejections`;
        * a builtin newcomer takes the name from an upstream or plugin tool (warning).

        The same name in the same toolset simply overwrites (that is how refresh works).
        """
        if not isinstance(schema, dict):
            raise ValueError(f"tool {name!r}: schema must be a dict, not {type(schema).__name__}")
        for key in ("inputSchema", "parameters"):
            if key in schema and not isinstance(schema[key], dict):
                raise ValueError(f"tool {name!r}: schema[{key!r}] must be a dict")
        if not callable(handler):
            raise ValueError(f"tool {name!r}: handler is not callable")
        resolved_origin: Origin = origin or default_origin(toolset)
        if not description:
            description = str(schema.get("description") or "")
        entry = ToolEntry(
            name=name,
            toolset=toolset,
            schema=schema,
            handler=handler,
            check_fn=check_fn,
            requires_env=list(requires_env) if requires_env else None,
            is_async=is_async_callable(handler) if is_async is None else is_async,
            description=description,
            emoji=emoji,
            max_result_size_chars=max_result_size_chars,
            dynamic_schema_overrides=dynamic_schema_overrides,
            origin=resolved_origin,
        )
        with self._lock:
            if not self._admit(entry, override):
                return False
            self._tools[name] = entry
            self._rejections.pop((name, toolset), None)
            announce = self._mark_changed()
        if announce is not None:
            self._notify(announce)
        return True

    def _admit(self, new: ToolEntry, override: bool) -> bool:
        """Apply the conflict policy (lock held). Raise PermissionError for plugins."""
        old = self._tools.get(new.name)
        if old is None or (old.toolset == new.toolset and old.origin == new.origin):
            return True
        if old.origin == "upstream" and new.origin == "upstream":
            logger.debug("tool %s: %s overwrites %s (MCP over MCP)", new.name, new.toolset,
                         old.toolset)
            return True
        if new.origin == "plugin":
            if override and self.allow_tool_override:
                logger.warning("tool %s: plugin toolset %s replaces %s (explicit override)",
                               new.name, new.toolset, old.toolset)
                return True
            raise PermissionError(
                f"tool {new.name!r} already exists in toolset {old.toolset!r}; a plugin may "
                "replace it only with override=True and allow_tool_override = true"
            )
        if new.origin == "builtin" and (old.origin != "builtin" or override):
            logger.warning("tool %s: builtin toolset %s replaces %s tool from %s",
                           new.name, new.toolset, old.origin, old.toolset)
            return True
        reason = f"name held by {old.origin} tool of toolset {old.toolset!r}"
        logger.error("tool %s from toolset %s REJECTED: %s", new.name, new.toolset, reason)
        key = (new.name, new.toolset)
        self._rejections.pop(key, None)  # re-insert so the newest is last
        self._rejections[key] = Rejection(new.name, new.toolset, old.toolset, reason)
        return False

    def register_many(self, entries: Iterable[Mapping[str, Any] | ToolEntry]) -> list[bool]:
        """Register several tools as one batch (one generation bump, one notification).

        Each item is a mapping of :meth:`register` keyword arguments or a ToolEntry.
        """
        results: list[bool] = []
        with self.batch():
            for item in entries:
                if isinstance(item, ToolEntry):
                    results.append(self.register(
                        item.name, item.toolset, item.schema, item.handler,
                        check_fn=item.check_fn, requires_env=item.requires_env,
                        is_async=item.is_async, description=item.description, emoji=item.emoji,
                        max_result_size_chars=item.max_result_size_chars,
                        dynamic_schema_overrides=item.dynamic_schema_overrides,
                        origin=item.origin,
                    ))
                else:
                    results.append(self.register(**item))
        return results

    def deregister(self, name: str) -> bool:
        """Remove one tool; return whether it existed."""
        with self._lock:
            if self._tools.pop(name, None) is None:
                return False
            announce = self._mark_changed()
        if announce is not None:
            self._notify(announce)
        return True

    def deregister_toolset(self, toolset: str) -> list[str]:
        """Remove every tool of ``toolset`` (one generation bump) and its rejections."""
        announce: int | None = None
        with self._lock:
            removed = sorted(n for n, e in self._tools.items() if e.toolset == toolset)
            for n in removed:
                del self._tools[n]
            stale = [k for k in self._rejections if k[1] == toolset]
            for k in stale:
                del self._rejections[k]
            if removed:
                announce = self._mark_changed()
        if announce is not None:
            self._notify(announce)
        return removed

    # ── availability and definitions (the definition cache) ──

    def invalidate_check_fn_cache(self) -> None:
        """Forget every cached check_fn result (and the definitions built from them)."""
        self.definitions.invalidate()

    def is_available(self, entry: ToolEntry) -> bool:
        """Whether the tool's required env vars are set and its check_fn passes."""
        return self.definitions.is_available(entry)

    def get_definitions(
        self, names: Iterable[str] | None = None, *, cache_key: Hashable = None
    ) -> list[dict[str, Any]]:
        """MCP tool definitions of the available tools among ``names`` (all when None).

        Sorted by name; filtered by ``requires_env`` and ``check_fn`` (each distinct
        check_fn probed once per pass); ``dynamic_schema_overrides()`` merged over the
        static schema (one that raises is logged and ignored). Cached in an LRU of 8
        keyed by (names, generation, cache_key, availability). Each call returns a new
        list of new top-level dicts; their nested parts (inputSchema, annotations, …)
        are read-only :class:`FrozenDict`/:class:`FrozenList` shared with the cache, so
        a caller cannot corrupt it (``copy.deepcopy`` gives fully mutable data).
        """
        return self.definitions.get(names, cache_key=cache_key)

    async def dispatch(self, name: str, args: dict[str, Any], **context: Any) -> CallToolResult:
        """Run a tool's handler and return a ``CallToolResult``; never raises for tool errors.

        Async handlers are awaited on the event loop; sync handlers run in a worker
        thread. Any exception except cancellation becomes an ``isError`` result with
        sanitised text. An unknown name is an ``isError`` result too (the pipeline
        reports unknown tools as protocol errors before it gets here).
        """
        entry = self._tools.get(name)
        if entry is None:
            return tool_error(f"Unknown tool: {name}")
        try:
            if entry.is_async:
                value = await entry.handler(args, **context)
            else:
                value = await anyio.to_thread.run_sync(
                    functools.partial(entry.handler, args, **context)
                )
                if inspect.isawaitable(value):
                    value = await value
            return normalize_result(value)
        except MCPError as exc:
            if exc.error.code in PROTOCOL_ERRORS:
                # A protocol-level request to the client (open this URL, declare this
                # capability), not a tool failure: it travels as the JSON-RPC error it
                # is, data included.
                raise
            logger.debug("tool %s raised", name, exc_info=True)
            text = sanitize_tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
            return CallToolResult(content=[TextContent(text=text)], is_error=True)
        except Exception as exc:
            logger.debug("tool %s raised", name, exc_info=True)
            text = sanitize_tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
            return CallToolResult(content=[TextContent(text=text)], is_error=True)


#: The table builtin tools declare themselves in at import time. It serves nothing:
#: each Hub registers entries made from it, bound to the Hub (mcp_hub.pipeline.builtin_binding).
registry = ToolRegistry()
