"""The definition cache: which tools are available now, and their MCP definitions.

One cache layer per fact. :class:`DefinitionCache` belongs to one
:class:`~mcp_hub.registry.tool_registry.ToolRegistry` and holds everything derived from its
entries for ``tools/list``:

* each ``check_fn`` result, with a 30 s TTL (a raising probe counts as False; a
  probe that fails within 60 s of its last success keeps the tool listed);
* per registry generation, the distinct check_fns and required env vars (the gates);
* an LRU of 8 built definition lists keyed by (names, generation, caller key,
  gate results), so a check_fn that flips after its TTL changes the key and the
  next listing shows it.

Everything above the registry (the Hub's listings, the bridge) asks this cache
instead of keeping its own copy of definitions. Imports nothing of the project
above the registry's own data modules.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp_hub.registry.entry import CheckFn, ToolEntry, input_schema_of
from mcp_hub.registry.frozen import freeze
from mcp_hub.registry.steps import STEP_ITEMS, Steps, run_steps

__all__ = [
    "CHECK_FN_GRACE_SECONDS",
    "CHECK_FN_TTL_SECONDS",
    "DEFINITIONS_CACHE_SIZE",
    "DefinitionCache",
    "definition_of",
]

logger = logging.getLogger("mcp_hub.registry.tool_registry")

CHECK_FN_TTL_SECONDS = 30.0
CHECK_FN_GRACE_SECONDS = 60.0
DEFINITIONS_CACHE_SIZE = 8

# Keys of an MCP tool definition passed through besides name/description/inputSchema.
_OPTIONAL_KEYS = ("title", "outputSchema", "annotations", "_meta", "icons", "execution")

#: What the cache reads from its registry, under the registry's lock: (generation, name → entry).
Source = Callable[[], tuple[int, Mapping[str, ToolEntry]]]


@dataclass(slots=True)
class _CheckRecord:
    checked_at: float
    value: bool
    last_success: float | None


class DefinitionCache:
    """check_fn results, gates and built definitions of one registry (see the module doc).

    ``lock`` is the registry's lock (held while reading ``source``); ``clock``
    (monotonic seconds) is injectable so the TTL can be tested without sleeping.
    """

    def __init__(self, lock: threading.RLock, source: Source,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = lock
        self._source = source
        self._clock = clock
        self._check_lock = threading.Lock()
        self._check_cache: dict[CheckFn, _CheckRecord] = {}
        self._defs_cache: OrderedDict[Hashable, tuple[dict[str, Any], ...]] = OrderedDict()
        # Per generation: the distinct check_fns and required env vars, for cache keys.
        self._gates: tuple[int, tuple[CheckFn, ...], tuple[str, ...]] | None = None
        # id(entry) -> (entry, its definition): an entry is replaced, never changed, when its
        # tool changes, so a new generation builds definitions only for the new entries (and
        # their nested parts keep their identity, which the per-tool caches above key on).
        self._by_entry: dict[int, tuple[ToolEntry, dict[str, Any]]] = {}

    def __len__(self) -> int:
        """How many built definition lists are cached."""
        return len(self._defs_cache)

    def invalidate(self) -> None:
        """Forget every cached check_fn result and the definitions built from them."""
        with self._check_lock:
            self._check_cache.clear()
        with self._lock:
            self._defs_cache.clear()
            self._by_entry = {}

    def check(self, fn: CheckFn) -> bool:
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
        return entry.check_fn is None or self.check(entry.check_fn)

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

    def availability_key(self) -> tuple[int, tuple[bool, ...], tuple[bool, ...]]:
        """(generation, check_fn results, env gates) now: changes whenever the listing may.

        Caches above the registry key on this instead of the bare generation, so a
        check_fn that flips after its TTL reaches them too.
        """
        with self._lock:
            generation, tools = self._source()
            checks, envs = self._gates_for(generation, tools.values())
        probes = tuple(self.check(fn) for fn in checks)
        return generation, probes, tuple(bool(os.environ.get(v)) for v in envs)

    def get(self, names: Iterable[str] | None = None, *, cache_key: Hashable = None
            ) -> list[dict[str, Any]]:
        """Definitions of the available tools among ``names``; see ``ToolRegistry.get_definitions``."""
        return run_steps(self.get_steps(names, cache_key=cache_key))

    def get_steps(self, names: Iterable[str] | None = None, *, cache_key: Hashable = None
                  ) -> Steps[list[dict[str, Any]]]:
        """:meth:`get` in steps of ``STEP_ITEMS`` entries (:mod:`mcp_hub.registry.steps`).

        The entries are taken under the lock in one piece; the steps after that
        (sorting, filtering, copying a thousand definitions) work on that snapshot,
        so a registry change between two steps gives the list of the snapshot's
        generation, which is not cached under a newer key.
        """
        name_key = None if names is None else frozenset(names)
        with self._lock:
            generation, tools = self._source()
            checks, envs = self._gates_for(generation, tools.values())
        probes = tuple(self.check(fn) for fn in checks)
        env_state = tuple(bool(os.environ.get(v)) for v in envs)
        key = (name_key, generation, cache_key, probes, env_state)
        with self._lock:
            cached = self._defs_cache.get(key)
            if cached is not None:
                self._defs_cache.move_to_end(key)
                entries = []
            else:
                # Mutated since the key was taken: build from the current state, don't cache.
                now_generation, tools = self._source()
                cacheable = now_generation == generation
                entries = [e for n, e in tools.items() if name_key is None or n in name_key]
        if cached is None:
            yield
            cached = tuple((yield from self._build(entries, dict(zip(checks, probes, strict=True)))))
            if cacheable:
                with self._lock:
                    self._defs_cache[key] = cached
                    self._defs_cache.move_to_end(key)
                    while len(self._defs_cache) > DEFINITIONS_CACHE_SIZE:
                        self._defs_cache.popitem(last=False)
        out: list[dict[str, Any]] = []
        for start in range(0, len(cached), STEP_ITEMS * 4):
            yield
            out.extend(map(dict.copy, cached[start:start + STEP_ITEMS * 4]))
        return out

    def _build(self, entries: list[ToolEntry], pass_checks: dict[CheckFn, bool]
               ) -> Steps[list[dict[str, Any]]]:
        entries.sort(key=lambda e: e.name)
        out: list[dict[str, Any]] = []
        environ = os.environ
        for i, e in enumerate(entries):
            if i % STEP_ITEMS == STEP_ITEMS - 1:
                yield
            if e.requires_env and not all(environ.get(v) for v in e.requires_env):
                continue
            if e.check_fn is not None:
                ok = pass_checks.get(e.check_fn)
                if ok is None:
                    ok = pass_checks[e.check_fn] = self.check(e.check_fn)
                if not ok:
                    continue
            out.append(self._definition(e))
        if len(self._by_entry) > 2 * len(entries) + 64:  # forget replaced entries
            keep = {id(e) for e in entries}
            self._by_entry = {k: v for k, v in self._by_entry.items() if k in keep}
        return out

    def _definition(self, e: ToolEntry) -> dict[str, Any]:
        """``definition_of(e)``, built once per entry unless it has dynamic overrides."""
        if e.dynamic_schema_overrides is not None:
            return definition_of(e)
        memo = self._by_entry.get(id(e))
        if memo is not None and memo[0] is e:
            return memo[1]
        d = self._by_entry[id(e)] = (e, definition_of(e))
        return d[1]


def definition_of(e: ToolEntry) -> dict[str, Any]:
    """The MCP definition of one entry, dynamic overrides merged, nested parts frozen."""
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
        "inputSchema": freeze(input_schema_of(schema)),
    }
    for k in _OPTIONAL_KEYS:
        v = schema.get(k)
        if v is not None:
            d[k] = freeze(v)
    return d
