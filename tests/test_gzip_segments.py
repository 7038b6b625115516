"""A list answer deflated in segments: decodes to the answer, compresses as well as in one
piece, and after a change deflates again only the segments the change touched.

The entries are the JSON of real tool definitions (``bench/catalog_server.py``'s
captured catalogs), serialised by :class:`~mcp_hub.downstream.lists.fragments.Fragments`
as the hub serialises them for a list.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest
from mcp import types

from bench.catalog_server import real_tools
from mcp_hub.downstream.lists.fragments import Fragments, Slicer
from mcp_hub.downstream.lists.gzip_answer import deflate_result, gzip_answer
from mcp_hub.downstream.lists.gzip_segments import (
    MAX_SEGMENT_BYTES,
    MIN_SEGMENT_BYTES,
    Layout,
    SegmentDeflater,
)
from mcp_hub.downstream.lists.prepared import PreparedLists

pytestmark = pytest.mark.anyio

VERSION = "2025-11-25"
PREFIX = b'{"jsonrpc":"2.0","id":42,"result":'


def _decoded(result: Any) -> bytes:
    answer = gzip_answer(PREFIX, result, b"}")
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    out = decoder.decompress(answer) + decoder.flush()
    assert decoder.eof and decoder.unused_data == b""
    return out


def _definitions(count: int) -> list[dict[str, Any]]:
    return [tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            for tool in real_tools(count)]


async def _page(fragments: Fragments, definitions: list[dict[str, Any]]) -> tuple[bytes, Layout]:
    return await fragments.page("tools", VERSION, definitions, None, None, Slicer(budget=3600.0))


async def test_segments_decode_to_the_answer_and_compress_as_one_piece() -> None:
    fragments = Fragments()
    page, layout = await _page(fragments, _definitions(1000))
    assert layout.join() == page
    assert 10 < len(layout.segments) < 200
    sizes = [sum(len(e) + 1 for e in segment) for segment in layout.segments]
    longest = max(len(e) + 1 for segment in layout.segments for e in segment)
    assert all(size < MAX_SEGMENT_BYTES + longest for size in sizes)
    assert all(size >= MIN_SEGMENT_BYTES for size in sizes[:-1])
    deflater = SegmentDeflater()
    segmented = deflater.deflate(page, layout)
    assert _decoded(segmented) == PREFIX + page + b"}"
    whole = deflate_result(page)
    assert (segmented.crc, segmented.size, segmented.operator) == (whole.crc, whole.size,
                                                                   whole.operator)
    # Each segment primed with the end of the one before: within 1 % of one piece.
    assert len(segmented.blocks) <= len(whole.blocks) * 1.01
    assert deflater.deflated_segments == len(layout.segments)


@pytest.mark.parametrize("change", ["insert", "remove", "edit", "append", "prepend"])
async def test_a_change_deflates_only_the_segments_around_it(change: str) -> None:
    definitions = _definitions(1000)
    fragments, deflater = Fragments(), SegmentDeflater()
    page, layout = await _page(fragments, definitions)
    deflater.deflate(page, layout)
    before = deflater.deflated_segments
    changed = list(definitions)
    new_tool = {"name": "brand_new_tool", "description": "added by an upstream",
                "inputSchema": {"type": "object"}}
    if change == "insert":
        changed.insert(500, new_tool)
    elif change == "remove":
        del changed[500]
    elif change == "edit":
        changed[500] = {**changed[500], "description": "a description that changed"}
    elif change == "append":
        changed.append(new_tool)
    else:
        changed.insert(0, new_tool)
    page2, layout2 = await _page(fragments, changed)
    result = deflater.deflate(page2, layout2)
    assert _decoded(result) == PREFIX + page2 + b"}"
    # The segment holding the change and the one after it (primed with its end); a
    # segment or two more where the boundaries settle again (the 32 KiB minimum moves
    # a cut now and then). In 2,400 random single changes: two in 92 %, four at most.
    assert deflater.deflated_segments - before <= 5
    assert deflater.reused_segments >= len(layout2.segments) - 5


async def test_the_cache_is_bounded_by_its_bytes() -> None:
    definitions = _definitions(200)
    fragments, deflater = Fragments(), SegmentDeflater(cache_bytes=64 * 1024)
    for round_ in range(5):  # every entry changes every round: nothing is reused
        changed = [{**d, "description": f"round {round_}"} for d in definitions]
        page, layout = await _page(fragments, changed)
        assert _decoded(deflater.deflate(page, layout)) == PREFIX + page + b"}"
        # Five rounds deflate some 1.7 MB; what stays is within the bound.
        assert sum(raw for _, raw in deflater._cache.values()) <= 64 * 1024


async def test_small_entries_compress_as_one_piece_too() -> None:
    """Entries of ~200 bytes (resources, prompts): segments still span a whole window."""
    fragments, deflater = Fragments(), SegmentDeflater()
    resources = [types.Resource(name=f"file {i}", uri=f"file:///srv/data/{i:05d}.csv",
                                description=f"row export {i % 97}", mime_type="text/csv")
                 for i in range(5000)]
    page, layout = await fragments.page("resources", VERSION, resources, None, None,
                                        Slicer(budget=3600.0))
    segmented = deflater.deflate(page, layout)
    assert _decoded(segmented) == PREFIX + page + b"}"
    assert len(segmented.blocks) <= len(deflate_result(page).blocks) * 1.01


async def test_an_empty_list_and_a_single_entry() -> None:
    fragments, deflater = Fragments(), SegmentDeflater()
    for definitions in ([], _definitions(1)):
        page, layout = await _page(fragments, definitions)
        assert layout.join() == page
        assert _decoded(deflater.deflate(page, layout)) == PREFIX + page + b"}"


async def test_prepared_lists_deflate_their_pages_in_segments() -> None:
    """A page PreparedLists built is deflated in segments; bytes it did not build, whole."""
    lists = PreparedLists(object())
    page, layout = await _page(lists.fragments, _definitions(300))
    lists._layouts[id(page)] = (page, layout)
    assert _decoded(await lists.deflated(page)) == PREFIX + page + b"}"
    assert lists.segments.deflated_segments == len(layout.segments)
    other = json.dumps({"tools": []}).encode()
    assert _decoded(await lists.deflated(other)) == PREFIX + other + b"}"
    assert lists.segments.deflated_segments == len(layout.segments)
