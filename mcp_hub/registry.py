"""The tool registry: every tool the hub can serve, whatever its origin.

A tool is four pieces: a handler, an optional ``check_fn`` (is it available
now?), a JSON schema, and a ``registry.register(...)`` call. Builtin tools,
plugins and upstream MCP servers all land here; the serving side reads
definitions from here and calls through :meth:`ToolRegistry.dispatch`.

Concurrency: every mutation happens under one ``RLock`` and bumps
``generation``; readers copy what they need inside the lock and work on the copy
outside it. Listeners (``add_listener``) learn of each new generation, outside the
lock, so the serving side can emit a debounced ``tools/list_changed``.

This module imports nothing of the project (the V-shaped import chain: tools
import the registry, orchestration imports everything).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import anyio.to_thread
from mcp.shared.exceptions import MCPError
from mcp.types import URL_ELICITATION_REQUIRED, CallToolResult, TextContent

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

Origin = Literal["builtin", "plugin", "upstream"]
Handler = Callable[..., Any]
CheckFn = Callable[[], Any]
SchemaOverrides = Callable[[], Mapping[str, Any] | None]

CHECK_FN_TTL_SECONDS = 30.0
CHECK_FN_GRACE_SECONDS = 60.0
DEFINITIONS_CACHE_SIZE = 8
MAX_ERROR_CHARS = 2000

# Keys of an MCP tool definition passed through besides name/description/inputSchema.
_OPTIONAL_KEYS = ("title", "outputSchema", "annotations", "_meta", "icons", "execution")
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


def _is_async_callable(fn: Handler) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on instances
    return call is not None and inspect.iscoroutinefunction(call)


def _default_origin(toolset: str) -> Origin:
    return "upstream" if toolset.startswith("mcp-") else "builtin"


# ── error sanitising ──────────────────────────────────────────────────────────

# Framework strings a model could mistake for a nested tool call.
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


def _sanitize_tool_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """Strip tool-call-like tags, code fences and CDATA from an error; cap its length."""
    for pattern in _SANITIZE_PATTERNS:
        text = pattern.sub("", text)
    text = text.strip()
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


# ── result helpers ────────────────────────────────────────────────────────────


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


# ── the registry ──────────────────────────────────────────────────────────────


@dataclass(slots=True)
class _CheckRecord:
    checked_at: float
    value: bool
    last_success: float | None


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
        self._clock = clock
        self._check_lock = threading.Lock()
        self._check_cache: dict[CheckFn, _CheckRecord] = {}
        self._defs_cache: OrderedDict[Hashable, tuple[dict[str, Any], ...]] = OrderedDict()
        # Per generation: the distinct check_fns and required env vars, for cache keys.
        self._gates: tuple[int, tuple[CheckFn, ...], tuple[str, ...]] | None = None
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

    # ── listeners ──

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

    # ── mutation ──

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
        resolved_origin: Origin = origin or _default_origin(toolset)
        if not description:
            description = str(schema.get("description") or "")
        entry = ToolEntry(
            name=name,
            toolset=toolset,
            schema=schema,
            handler=handler,
            check_fn=check_fn,
            requires_env=list(requires_env) if requires_env else None,
            is_async=_is_async_callable(handler) if is_async is None else is_async,
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

    # ── availability ──

    def invalidate_check_fn_cache(self) -> None:
        """Forget every cached check_fn result (and the definitions built from them)."""
        with self._check_lock:
            self._check_cache.clear()
        with self._lock:
            self._defs_cache.clear()

    def _check(self, fn: CheckFn) -> bool:
        """check_fn result with a 30 s TTL; a raising probe is False; 60 s grace on failure."""
        now = self._clock()
        with self._check_lock:
            record = self._check_cache.get(fn)
        if record is not None and now - record.checked_at < CHECK_FN_TTL_SECONDS:
            return record.value
        try:
            value = bool(fn())
        except Exception as exc:
            logger.warning("check_fn %r raised %s: %s", fn, type(exc).__name__, exc)
            value = False
        last_success = record.last_success if record is not None else None
        if value:
            with self._check_lock:
                self._check_cache[fn] = _CheckRecord(now, True, now)
            return True
        if last_success is not None and now - last_success < CHECK_FN_GRACE_SECONDS:
            # Not cached: the next pass probes again.
            logger.warning("check_fn %r failed; keeping the last success (%.0f s ago)",
                           fn, now - last_success)
            return True
        with self._check_lock:
            self._check_cache[fn] = _CheckRecord(now, False, last_success)
        return False

    def is_available(self, entry: ToolEntry) -> bool:
        """Whether the tool's required env vars are set and its check_fn passes."""
        if entry.requires_env and not all(os.environ.get(v) for v in entry.requires_env):
            return False
        return entry.check_fn is None or self._check(entry.check_fn)

    def _gates_for(self, generation: int, entries: Iterable[ToolEntry]) -> tuple[
        tuple[CheckFn, ...], tuple[str, ...]
    ]:
        gates = self._gates
        if gates is not None and gates[0] == generation:
            return gates[1], gates[2]
        checks: dict[CheckFn, None] = {}
        envs: dict[str, None] = {}
        for e in entries:
            if e.check_fn is not None:
                checks[e.check_fn] = None
            for v in e.requires_env or ():
                envs[v] = None
        self._gates = (generation, tuple(checks), tuple(envs))
        return self._gates[1], self._gates[2]

    # ── definitions ──

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
        name_key = None if names is None else frozenset(names)
        with self._lock:
            generation = self._generation
            entries_map = self._tools
            checks, envs = self._gates_for(generation, entries_map.values())
        probes = tuple(self._check(fn) for fn in checks)
        env_state = tuple(bool(os.environ.get(v)) for v in envs)
        key = (name_key, generation, cache_key, probes, env_state)
        with self._lock:
            cached = self._defs_cache.get(key)
            if cached is not None:
                self._defs_cache.move_to_end(key)
                entries = []
            else:
                # Mutated since the key was taken: build from the current state, don't cache.
                cacheable = self._generation == generation
                entries = [
                    e for n, e in self._tools.items() if name_key is None or n in name_key
                ]
        if cached is not None:
            return list(map(dict.copy, cached))
        pass_checks = dict(zip(checks, probes, strict=True))
        built = tuple(self._build_definitions(entries, pass_checks))
        if cacheable:
            with self._lock:
                self._defs_cache[key] = built
                self._defs_cache.move_to_end(key)
                while len(self._defs_cache) > DEFINITIONS_CACHE_SIZE:
                    self._defs_cache.popitem(last=False)
        return list(map(dict.copy, built))

    def _build_definitions(
        self, entries: list[ToolEntry], pass_checks: dict[CheckFn, bool]
    ) -> list[dict[str, Any]]:
        entries.sort(key=lambda e: e.name)
        out: list[dict[str, Any]] = []
        environ = os.environ
        for e in entries:
            if e.requires_env and not all(environ.get(v) for v in e.requires_env):
                continue
            if e.check_fn is not None:
                ok = pass_checks.get(e.check_fn)
                if ok is None:
                    ok = pass_checks[e.check_fn] = self._check(e.check_fn)
                if not ok:
                    continue
            out.append(self._definition(e))
        return out

    @staticmethod
    def _definition(e: ToolEntry) -> dict[str, Any]:
        schema: Mapping[str, Any] = e.schema
        description = e.description
        if e.dynamic_schema_overrides is not None:
            try:
                extra = e.dynamic_schema_overrides()
            except Exception:
                logger.exception("dynamic_schema_overrides of %s failed; static schema kept",
                                 e.name)
                extra = None
            if extra:
                schema = {**schema, **extra}
                if extra.get("description"):
                    description = str(extra["description"])
        d: dict[str, Any] = {
            "name": e.name,
            "description": description,
            "inputSchema": _freeze(input_schema_of(schema)),
        }
        for k in _OPTIONAL_KEYS:
            v = schema.get(k)
            if v is not None:
                d[k] = _freeze(v)
        return d

    # ── calling ──

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
            if exc.error.code == URL_ELICITATION_REQUIRED:
                # A protocol-level request to the client (open this URL), not a tool
                # failure: it travels as the JSON-RPC error it is, data included.
                raise
            logger.debug("tool %s raised", name, exc_info=True)
            text = _sanitize_tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
            return CallToolResult(content=[TextContent(text=text)], is_error=True)
        except Exception as exc:
            logger.debug("tool %s raised", name, exc_info=True)
            text = _sanitize_tool_error(f"Tool execution failed: {type(exc).__name__}: {exc}")
            return CallToolResult(content=[TextContent(text=text)], is_error=True)


def _read_only(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(
        "tool definitions are shared with the registry's cache below the top level; "
        "copy.deepcopy() the definition before changing its nested parts"
    )


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation: nested parts of cached tool definitions.

    It serialises, compares and validates like a dict; ``copy.copy``,
    ``copy.deepcopy`` and ``dict(x)`` return plain, mutable dicts.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """The list counterpart of :class:`FrozenDict`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


def _freeze(value: Any) -> Any:
    """A read-only copy of JSON-shaped data (dicts and lists); scalars are shared."""
    if isinstance(value, dict):
        return FrozenDict({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([_freeze(v) for v in value])
    return value


#: The process-wide registry builtin tools register into at import time.
registry = ToolRegistry()
