"""A list answer as a join of cached per-entry JSON, built on the loop in short slices.

Serialising a ``tools/list`` of 1,000 real tools (models, the SDK's per-version
sieve, JSON) costs on the order of 100 ms of CPU. Done in one piece, on the loop
or in a worker thread (which holds the GIL just the same), it stalls every call
in flight. Here instead:

* each entry's JSON is serialised once per (protocol version, entry) and kept:
  a tool by :func:`mcp_hub.registry.models.definition_key` (unchanged tools keep
  their key across registry generations), a prompt/resource/template by the
  identity of its model (kept alive with it). A new generation serialises only
  what changed;
* the envelope (``nextCursor``, ``ttlMs``/``cacheScope``, ``resultType``) is
  serialised for the version with an empty list, and the answer is the envelope
  with the joined entries spliced in where the empty list was;
* every step runs on the event loop and yields (:class:`Slicer`) as soon as it
  has held the loop for ``SLICE_SECONDS``, so no call waits behind a list for
  longer than about that.

Each entry goes through the same steps the SDK takes for the whole result
(``model_dump(by_alias, mode="json", exclude_none)``, the version's sieve,
pydantic-core's compact JSON), and a list's items are dumped independently, so
the joined bytes equal the SDK's serialisation of the whole result
(``tests/test_list_fragments.py`` checks this against the whole-result
serialisation for real catalogs in every protocol version).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types.methods as _methods
import pydantic_core
from mcp import types

from mcp_hub.downstream.lists.gzip_segments import Layout
from mcp_hub.registry.models import cacheable, definition_key, tool_model

__all__ = ["SLICE_SECONDS", "SWEEP_SLACK", "Fragments", "Slicer"]

#: How long one step of a preparation may hold the event loop before it yields.
SLICE_SECONDS = 0.001
#: Entries a kind's store may gain beyond one list's worth before a sweep (:meth:`Fragments.sweep`).
SWEEP_SLACK = 256

_FIELD = {"tools": "tools", "prompts": "prompts", "resources": "resources",
          "templates": "resourceTemplates"}
_METHOD = {"tools": "tools/list", "prompts": "prompts/list", "resources": "resources/list",
           "templates": "resources/templates/list"}


class Slicer:
    """Yields to the event loop once the current slice has held it for ``budget`` seconds."""

    def __init__(self, budget: float = SLICE_SECONDS) -> None:
        self.budget = budget
        self.started = time.perf_counter()
        #: How many times this preparation yielded (tests and the benchmark read it).
        self.yields = 0

    async def checkpoint(self) -> None:
        if time.perf_counter() - self.started >= self.budget:
            await anyio.lowlevel.checkpoint()
            self.yields += 1
            self.started = time.perf_counter()


def _result_model(kind: str, items: list[Any], cursor: str | None,
                  hint: tuple[int, str] | None) -> Any:
    extra: dict[str, Any] = {"next_cursor": cursor}
    if hint is not None:
        extra["ttl_ms"], extra["cache_scope"] = hint
    if kind == "tools":
        return types.ListToolsResult(tools=items, **extra)
    if kind == "prompts":
        return types.ListPromptsResult(prompts=items, **extra)
    if kind == "resources":
        return types.ListResourcesResult(resources=items, **extra)
    return types.ListResourceTemplatesResult(resource_templates=items, **extra)


class Fragments:
    """Cached JSON of single list entries, and the envelopes they are spliced into."""

    def __init__(self, size: int = 50_000) -> None:
        self.size = size
        # One store per kind, so a large resource list rebuilt at each change never evicts tools.
        self._entries: dict[str, OrderedDict[tuple[Any, ...], tuple[Any, bytes]]] = {
            kind: OrderedDict() for kind in _FIELD}
        self._envelopes: dict[tuple[Any, ...], tuple[dict[str, Any], bytes, bytes]] = {}
        #: Entries serialised so far (a cache miss each); tests read it.
        self.serialised = 0
        #: Keys a page used since the last :meth:`sweep`, and in the period before, per kind.
        self._used: dict[str, set[tuple[Any, ...]]] = {kind: set() for kind in _FIELD}
        self._previous: dict[str, set[tuple[Any, ...]]] = {kind: set() for kind in _FIELD}
        self._swept_size: dict[str, int] = dict.fromkeys(_FIELD, 0)

    def count(self, kind: str) -> int:
        """How many entries of ``kind`` are kept."""
        return len(self._entries[kind])

    def sweep(self, kind: str, in_use: int) -> int:
        """Forget the entries of ``kind`` that no page used in the last two sweep periods;
        how many. A period ends once the store has gained ``in_use`` (the size of the list
        just prepared) plus ``SWEEP_SLACK`` entries since the last sweep.

        Called after every preparation. Without it a catalog that changes keeps every
        old version of its definitions (and their JSON) alive up to ``size`` entries:
        fifty versions of a thousand tools, all of it walked by every full garbage
        collection. Lists prepared in either period (other callers, other protocol
        versions) keep their entries; one not prepared for two periods is serialised
        again when it is next asked for.
        """
        store, used = self._entries[kind], self._used[kind]
        if len(store) - self._swept_size[kind] <= in_use + SWEEP_SLACK:
            return 0
        keep = used | self._previous[kind]
        stale = [key for key in store if key not in keep]
        for key in stale:
            del store[key]
        self._previous[kind], self._used[kind] = used, set()
        self._swept_size[kind] = len(store)
        return len(stale)

    def envelope(self, kind: str, version: str, cursor: str | None,
                 hint: tuple[int, str] | None) -> tuple[dict[str, Any], bytes, bytes]:
        """(the dumped empty result, the bytes before the entries, the bytes after them)."""
        key = (kind, version, cursor, hint)
        found = self._envelopes.get(key)
        if found is None:
            dumped = _result_model(kind, [], cursor, hint).model_dump(
                by_alias=True, mode="json", exclude_none=True)
            data = pydantic_core.to_json(_methods.serialize_server_result(_METHOD[kind], version, dumped))
            marker = b'"' + _FIELD[kind].encode() + b'":[]'
            head, _, tail = data.partition(marker)
            found = (dumped, head + marker[:-1], b"]" + tail)
            if len(self._envelopes) > 256:
                self._envelopes.clear()
            self._envelopes[key] = found
        return found

    def entry(self, kind: str, version: str, item: Any, dumped_envelope: Mapping[str, Any]) -> bytes:
        """The JSON of one entry (a tool definition dict, or a prompt/resource/template model)."""
        key = (version, definition_key(item)) if kind == "tools" else (version, kind, id(item))
        store = self._entries[kind]
        hit = store.get(key)
        if hit is not None:
            self._used[kind].add(key)
            return hit[1]
        model = tool_model(item) if kind == "tools" else item
        dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
        field = _FIELD[kind]
        shaped = _methods.serialize_server_result(_METHOD[kind], version,
                                                  {**dumped_envelope, field: [dumped]})
        data = pydantic_core.to_json(shaped[field][0])
        self.serialised += 1
        if kind != "tools" or cacheable(item):
            store[key] = (item, data)  # the item is kept: its identity is in the key
            self._used[kind].add(key)
            while len(store) > self.size:
                store.popitem(last=False)
        return data

    async def page(self, kind: str, version: str, items: Sequence[Any], cursor: str | None,
                   hint: tuple[int, str] | None, slicer: Slicer) -> tuple[bytes, Layout]:
        """One page's serialised result, built in slices, and how it is made of its entries
        (for deflating it in segments, :mod:`.gzip_segments`)."""
        dumped, head, tail = self.envelope(kind, version, cursor, hint)
        layout = Layout(head)
        for item in items:
            layout.add(self.entry(kind, version, item, dumped))
            await slicer.checkpoint()
        layout.close(tail)
        return layout.join(), layout
