"""Lists served from prepared bytes: ``tools/list`` and friends cost a lookup, not a build.

A ``tools/list`` of a large catalog is the most expensive answer the hub gives:
building the models, dumping them, shaping them for the protocol version and
encoding the JSON takes tens of milliseconds for a thousand tools, and on the
event loop every call in flight waits behind it. Here the ``result`` of each
list is serialised once per

    (kind, caller, protocol version, generation of that list, config, cache hint)

and every later list of the same key is answered with those bytes (on the
stdio and HTTP fast paths). The serialisation is the SDK's own: the result
model dumped ``by_alias``/``exclude_none`` and sieved by
``serialize_server_result`` for the negotiated version, then encoded by
pydantic-core, so the bytes equal what the SDK would write (compact, no null
fields).

Preparation runs on the event loop in slices of about a millisecond, and
serialises only the entries that changed since the last generation
(:mod:`.list_fragments`), so calls in flight barely notice it; a burst of
lists of one key (every client re-listing after a ``list_changed``) waits for
one preparation. For 2026-07-28 clients the answer carries the ``ttlMs`` and
``cacheScope`` of :mod:`mcp_hub.hub.list_freshness`; a change of those makes the
prepared bytes stale too. A list of more than ``page_size`` entries is split into
pages whose ``nextCursor`` names the preparation it belongs to: a cursor from
a list that has changed since is refused with ``-32602`` and a message saying to list
again, never answered with a page of a different list.
"""

from __future__ import annotations

import base64
import itertools
import logging
import weakref
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.lowlevel
import mcp_types.methods as _methods
import pydantic_core
from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_hub.downstream.lists.fragments import Fragments, Slicer
from mcp_hub.downstream.lists.gzip_answer import Deflated, deflate_result
from mcp_hub.downstream.lists.gzip_segments import Layout, SegmentDeflater
from mcp_hub.hub.access import Caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.hub.list_freshness import ListHintValue
from mcp_hub.plumbing.flights import Flights
from mcp_hub.plumbing.low_priority import low_priority

__all__ = ["LIST_METHODS", "ListKind", "PreparedLists", "prepared_lists"]

logger = logging.getLogger(__name__)

ListKind = Literal["tools", "prompts", "resources", "templates"]
#: The JSON-RPC list methods served from prepared bytes, and what each lists.
LIST_METHODS: dict[str, ListKind] = {
    "tools/list": "tools",
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "templates",
}
_METHOD_OF: dict[ListKind, str] = {kind: method for method, kind in LIST_METHODS.items()}
_MAX_ENTRIES = 64
#: Answers from this size on take turns with each other (:meth:`PreparedLists._paced`).
PACE_BYTES = 256 * 1024


@dataclass
class _Prepared:
    generation: Hashable
    config: Any
    pages: list[bytes]
    #: Names this preparation in its cursors (a later one of the same key has another).
    serial: int
    #: The ``ttlMs``/``cacheScope`` it carries (2026-07-28 only; :mod:`mcp_hub.hub.list_freshness`).
    hint: ListHintValue


class PreparedLists:
    """The prepared list answers of one hub (see the module docstring)."""

    def __init__(self, hub: ServingHub, *, page_size: int | None = None) -> None:
        self.hub = hub
        #: Entries per page; None: ``[hub] list_page_size`` (0 there: one page).
        self.page_size = page_size if page_size and page_size > 0 else None
        self._entries: OrderedDict[tuple[Any, ...], _Prepared] = OrderedDict()
        #: Preparations (by list key) and deflations (by page) under way.
        self._flights = Flights()
        self._serials = itertools.count(1)
        #: How many preparations ran (a burst of lists of one key counts once).
        self.preparations = 0
        #: Loop slices those preparations took (each holds the loop ~``SLICE_SECONDS`` at most).
        self.slices = 0
        self.fragments = Fragments()
        self._pace = anyio.Lock()
        #: Deflated pages by the identity of their bytes (the bytes are kept, so the id is theirs).
        self._deflated: OrderedDict[int, tuple[bytes, Deflated]] = OrderedDict()
        #: How each kept page (of ``_entries``) is made of its entries, by its bytes' identity.
        self._layouts: dict[int, tuple[bytes, Layout]] = {}
        #: Deflates pages in segments, reusing those a change left alone (:mod:`.gzip_segments`).
        self.segments = SegmentDeflater()
        #: How many pages were deflated (a burst of gzip lists of one page counts once).
        self.deflations = 0

    def hint(self, kind: ListKind, caller: Caller) -> ListHintValue:
        """The ``ttlMs``/``cacheScope`` of this list now (changes make the prepared bytes stale)."""
        generation = self.generation(kind) if kind == "tools" else None
        gated = isinstance(generation, tuple) and bool(generation[1])
        return self.hub.list_hint(kind, caller, gated=gated)

    # ------------------------------------------------------------------ generations
    def generation(self, kind: ListKind) -> Hashable:
        """What changes when the list of ``kind`` may: for tools, the registry's generation with
        the availability of gated tools (a ``check_fn`` that flips after its TTL); for the
        others, the session tracker's change counter."""
        if kind == "tools":
            return self.hub.tools_availability()
        counters = getattr(self.hub.sessions, "generations", {})
        return int(counters.get("prompts" if kind == "prompts" else "resources", 0))

    # ------------------------------------------------------------------ answers
    async def result(self, kind: ListKind, caller: Caller, version: str,
                     cursor: str | None = None) -> bytes:
        """The serialised ``result`` of one list page; ``MCPError`` for a stale or foreign cursor."""
        key = (kind, caller, version)
        while True:
            generation = self.generation(kind)
            entry = self._entries.get(key)
            if entry is not None and self._fresh(entry, kind, caller, generation):
                return await self._paced(self._page(entry, cursor))
            if not await self._flights.joined(key):
                await self._prepare(key, kind, caller, version, generation)

    async def _paced(self, page: bytes) -> bytes:
        """Large answers leave one per turn of the event loop.

        After a preparation, every client of a burst (20 re-lists of 1.7 MB) would
        otherwise be answered, and its bytes written, in the same turn of the loop;
        taking turns lets the calls that arrive meanwhile be read and answered
        between two of those writes.
        """
        if len(page) >= PACE_BYTES:
            await self.turn()
        return page

    async def turn(self) -> None:
        """Wait for a turn of the event loop of one's own among the lists, in arrival order.

        The one gate of every list path: large pages pass it before they are answered
        (:meth:`_paced`), and the HTTP fast path makes each list pass it before its
        first steps, so twenty lists arriving together run in twenty turns, with the
        calls of each turn beside them. Alone, a list waits one turn.
        """
        async with self._pace:
            await anyio.lowlevel.checkpoint()

    async def deflated(self, page: bytes) -> Deflated:
        """``page`` deflated for gzip answers (:mod:`.gzip_answer`): once per prepared page,
        in the low-priority background thread (:mod:`mcp_hub.plumbing.low_priority`), however many
        clients ask for it meanwhile. A page prepared here is deflated in segments, and
        only the segments a change touched are deflated again (:mod:`.gzip_segments`)."""
        key = ("deflate", id(page))
        while True:
            held = self._deflated.get(id(page))
            if held is not None and held[0] is page:
                return held[1]
            if not await self._flights.joined(key):
                break
        with self._flights.flying(key):
            held_layout = self._layouts.get(id(page))
            if held_layout is not None and held_layout[0] is page:
                deflated = await low_priority().run(self.segments.deflate, page, held_layout[1])
            else:
                deflated = await low_priority().run(deflate_result, page)
            self.deflations += 1
            self._deflated[id(page)] = (page, deflated)
            while len(self._deflated) > _MAX_ENTRIES:
                self._deflated.popitem(last=False)
            return deflated

    def cached(self, kind: ListKind, caller: Caller, version: str) -> bool:
        """Whether the next list of this key is answered without a preparation."""
        return self._fresh(self._entries.get((kind, caller, version)), kind, caller,
                           self.generation(kind))

    def _fresh(self, entry: _Prepared | None, kind: ListKind, caller: Caller,
               generation: Hashable) -> bool:
        if entry is None or entry.generation != generation or entry.config is not self.hub.config:
            return False
        gated = kind == "tools" and isinstance(generation, tuple) and bool(generation[1])
        return entry.hint == self.hub.list_hint(kind, caller, gated=gated)

    async def _prepare(self, key: tuple[Any, ...], kind: ListKind, caller: Caller, version: str,
                       generation: Hashable) -> None:
        config = self.hub.config
        with self._flights.flying(key):
            await self.hub.wait_lists()
            slicer = Slicer()
            items = await self._items(kind, caller, slicer)
            await slicer.checkpoint()
            hint = self.hint(kind, caller)
            serial = next(self._serials)
            pages, layouts = await self._build(kind, version, serial, items, hint, slicer)
            self.fragments.sweep(kind, len(items))  # old versions of changed entries go
            self.preparations += 1
            self.slices += slicer.yields + 1
            if self.generation(kind) == generation and self.hub.config is config:
                self._forget_layouts(self._entries.get(key))
                self._entries[key] = _Prepared(generation, config, pages, serial, hint)
                self._entries.move_to_end(key)
                for page, layout in zip(pages, layouts, strict=True):
                    self._layouts[id(page)] = (page, layout)
                while len(self._entries) > _MAX_ENTRIES:
                    self._forget_layouts(self._entries.popitem(last=False)[1])
            # else: the list changed while it was prepared; the caller's loop prepares again.

    def _forget_layouts(self, entry: _Prepared | None) -> None:
        """Drop the layouts of a preparation no longer kept (its pages may still be in use,
        and are deflated whole if asked for)."""
        if entry is not None:
            for page in entry.pages:
                held = self._layouts.get(id(page))
                if held is not None and held[0] is page:
                    del self._layouts[id(page)]

    def _page(self, entry: _Prepared, cursor: str | None) -> bytes:
        if cursor is None:
            return entry.pages[0]
        serial, index = _parse_cursor(cursor)
        if serial != entry.serial:
            raise MCPError(types.INVALID_PARAMS,
                           "Invalid cursor: the list changed since this cursor was issued; "
                           "list again without a cursor")
        if not 0 < index < len(entry.pages):
            raise MCPError(types.INVALID_PARAMS, "Invalid cursor")
        return entry.pages[index]

    # ------------------------------------------------------------------ building (on the loop, sliced)
    async def _build(self, kind: ListKind, version: str, serial: int, items: list[Any],
                     hint: tuple[int, str] | None, slicer: Slicer
                     ) -> tuple[list[bytes], list[Layout]]:
        configured = getattr(self.hub.config.hub, "list_page_size", 0)
        size = self.page_size or configured or max(len(items), 1)
        chunks = [items[i:i + size] for i in range(0, len(items), size)] or [[]]
        pages: list[bytes] = []
        layouts: list[Layout] = []
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            cursor = None if last else _make_cursor(serial, index + 1)
            page, layout = await self.fragments.page(kind, version, chunk, cursor, hint, slicer)
            pages.append(page)
            layouts.append(layout)
        return pages, layouts

    async def _items(self, kind: ListKind, caller: Caller, slicer: Slicer) -> list[Any]:
        if kind == "tools":  # definitions, in slices; the entries' JSON is cached per definition
            return list(await self.hub.tool_definitions_sliced(caller, slicer.checkpoint))
        if kind == "prompts":
            return list(await self.hub.list_prompts(caller))
        if kind == "resources":
            return list(await self.hub.list_resources(caller))
        return list(await self.hub.list_resource_templates(caller))


def serialize_result(method: str, version: str, result: Any) -> bytes:
    """A handler's result as the SDK writes it for ``version``: dumped, sieved, compact JSON."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    shaped = _methods.serialize_server_result(method, version, dumped)
    return pydantic_core.to_json(shaped)


def _make_cursor(serial: int, index: int) -> str:
    return base64.urlsafe_b64encode(f"mcp-hub:{serial}:{index}".encode()).decode().rstrip("=")


def _parse_cursor(cursor: str) -> tuple[int, int]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        tag, serial, index = raw.split(":")
        if tag != "mcp-hub":
            raise ValueError(tag)
        return int(serial), int(index)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MCPError(types.INVALID_PARAMS, "Invalid cursor") from exc


_BY_HUB: weakref.WeakKeyDictionary[Any, PreparedLists] = weakref.WeakKeyDictionary()


def prepared_lists(hub: ServingHub) -> PreparedLists:
    """The one :class:`PreparedLists` of ``hub`` (both fast paths share it)."""
    lists = _BY_HUB.get(hub)
    if lists is None:
        lists = _BY_HUB[hub] = PreparedLists(hub)
    return lists
