"""A list answer deflated in segments, so that after a change only what changed is deflated.

Deflating a 1.7 MB ``tools/list`` answer takes 15–20 ms of CPU, and a new one
is needed at every change of the catalog: exactly when every client re-lists.
Yet one added or changed tool changes a couple of kilobytes of it.

So the prepared answer is deflated as a sequence of segments, each a run of
consecutive entries (:class:`Layout`), and each segment's deflated bytes are
kept for the next deflation. Segment boundaries depend on the entries, not on
positions: a segment ends after an entry whose hash has its low bits zero, once
it holds at least the 32 KiB of a deflate window. An entry inserted, removed or
edited moves only the boundaries around it, and the other segments are found
again unchanged.

Every segment is compressed by a compressor of its own and ends with a sync
flush (byte-aligned, not final), so the segments' deflated bytes concatenate
into one valid deflate stream whose decoding is the answer. A segment is
compressed with the last 32 KiB of the one before it as its preset dictionary:
that is what the decoder's window holds at that point of the stream (segments
are at least that long), so the back-references stay valid and the answer
compresses about as well as in one piece. The cache key of a segment is
therefore its own entries and those of the segment before it.

The deflated bytes go where :func:`mcp_hub.downstream.lists.gzip_answer.deflate_result`
puts them (a :class:`~mcp_hub.downstream.lists.gzip_answer.Deflated`), so the gzip
answer is assembled the same way, and the tests decode it against the
uncompressed answer.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

from mcp_hub.downstream.lists.gzip_answer import LEVEL, Deflated, combine_operator

__all__ = ["BOUNDARY_MASK", "CACHE_BYTES", "MAX_SEGMENT_BYTES", "MIN_SEGMENT_BYTES", "Layout",
           "SegmentDeflater"]

#: A segment ends after an entry whose ``hash`` has these bits zero (one entry in 32) ...
BOUNDARY_MASK = 31
#: ... once it holds at least a deflate window's worth of bytes ...
MIN_SEGMENT_BYTES = 32 * 1024
#: ... or once it holds this many, whatever the hashes.
MAX_SEGMENT_BYTES = 512 * 1024
#: Segments kept for later deflations, counted by their uncompressed size (the key holds
#: their entries; least recently used go first): some twenty 1.7 MB answers' worth.
CACHE_BYTES = 32 * 1024 * 1024
_WINDOW = 32 * 1024
_EMPTY: tuple[bytes, ...] = ()
_Key = tuple[tuple[bytes, ...], tuple[bytes, ...], bool]


@dataclass
class Layout:
    """How one prepared answer is made: ``head``, the entries joined by commas, ``tail``.

    ``segments`` holds the entries' JSON (the cached bytes objects of
    :mod:`.list_fragments`), cut into runs by :meth:`add`.
    """

    head: bytes
    tail: bytes = b""
    segments: list[tuple[bytes, ...]] = field(default_factory=list)
    _open: list[bytes] = field(default_factory=list)
    _size: int = 0

    def add(self, entry: bytes) -> None:
        """The next entry of the answer (its JSON, as spliced in)."""
        self._open.append(entry)
        self._size += len(entry) + 1
        size = self._size
        if size >= MIN_SEGMENT_BYTES and (hash(entry) & BOUNDARY_MASK == 0
                                          or size >= MAX_SEGMENT_BYTES):
            self.segments.append(tuple(self._open))
            self._open, self._size = [], 0

    def close(self, tail: bytes) -> Layout:
        """The bytes after the last entry; the layout is complete."""
        if self._open:
            self.segments.append(tuple(self._open))
            self._open, self._size = [], 0
        self.tail = tail
        return self

    def join(self) -> bytes:
        """The answer's bytes, in one copy (a megabyte or two for large catalogs)."""
        parts = [self.head]
        for segment in self.segments:
            for entry in segment:
                parts += (entry, b",")
        if len(parts) > 1:
            parts.pop()  # the comma after the last entry
        parts.append(self.tail)
        return b"".join(parts)


def _window(segment: tuple[bytes, ...]) -> bytes:
    """The last 32 KiB of ``segment`` as it stands in the answer (a comma after it)."""
    size, start = 0, len(segment)
    while start > 0 and size < _WINDOW:
        start -= 1
        size += len(segment[start]) + 1
    return (b",".join(segment[start:]) + b",")[-_WINDOW:]


def _deflate(data: bytes, zdict: bytes | None, level: int) -> bytes:
    compressor = (zlib.compressobj(level, zlib.DEFLATED, -15, zdict=zdict) if zdict
                  else zlib.compressobj(level, zlib.DEFLATED, -15))
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


class SegmentDeflater:
    """Deflates laid-out answers, keeping deflated segments (up to ``cache_bytes`` of their
    uncompressed size) for the next ones.

    Blocking, and not thread-safe: it runs in the one low-priority thread
    (:mod:`mcp_hub.plumbing.low_priority`), where zlib works without the GIL.
    """

    def __init__(self, level: int = LEVEL, cache_bytes: int = CACHE_BYTES) -> None:
        self.level = level
        #: Segments of at most this many uncompressed bytes are kept (the keys hold the
        #: entries, the lists' own cached JSON, mostly held by :mod:`.list_fragments` too).
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[_Key, tuple[bytes, int]] = OrderedDict()
        self._cached = 0
        #: Segments deflated so far (cache misses); the tests and the benchmark read it.
        self.deflated_segments = 0
        #: Segments found deflated already.
        self.reused_segments = 0

    def deflate(self, answer: bytes, layout: Layout) -> Deflated:
        """``answer`` (which ``layout`` describes) as non-final deflate blocks ending byte-aligned."""
        parts = [_deflate(layout.head, None, self.level)]
        cache = self._cache
        previous: tuple[bytes, ...] = _EMPTY
        last = len(layout.segments) - 1
        for index, segment in enumerate(layout.segments):
            key = (previous, segment, index == last)
            held = cache.get(key)
            if held is None:
                raw = b",".join(segment) + (b"" if index == last else b",")
                data = _deflate(raw, _window(previous) if previous else None, self.level)
                cache[key] = (data, len(raw))
                self._cached += len(raw)
                self.deflated_segments += 1
            else:
                data = held[0]
                cache.move_to_end(key)
                self.reused_segments += 1
            parts.append(data)
            previous = segment
        parts.append(_deflate(layout.tail, None, self.level))
        while self._cached > self.cache_bytes and cache:
            self._cached -= cache.popitem(last=False)[1][1]
        blocks = b"".join(parts)
        return Deflated(blocks, zlib.crc32(answer), len(answer), combine_operator(len(answer)))
