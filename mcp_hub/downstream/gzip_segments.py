"""A list answer deflated in segments, so that after a change only what changed is deflated.

Deflating a 1.7 MB ``tools/list`` answer takes 15–20 ms of CPU, and a new one
is needed at every change of the catalog: exactly when every client re-lists.
Yet one added or changed tool changes a couple of kilobytes of it.

So the prepared answer is deflated as a sequence of segments, each a run of
consecutive entries (:class:`Layout`), and each segment's deflated bytes are
kept for the next deflation. Segment boundaries depend on the entries alone
(the boundary falls after an entry whose hash has its low bits zero), not on
positions, so an entry inserted or removed moves only the boundaries around it
and every other segment is found again unchanged.

Every segment is compressed by a compressor of its own and ends with a sync
flush (byte-aligned, not final), so the segments' deflated bytes concatenate
into one valid deflate stream whose decoding is the answer. A segment is
compressed with the last 32 KiB of the one before it as its preset dictionary:
that is what the decoder's window holds at that point of the stream, so the
back-references stay valid and the answer compresses as well as in one piece.
The cache key of a segment is therefore its own entries and those of the
segment before it.

The deflated bytes go where :func:`mcp_hub.downstream.gzip_answer.deflate_result`
puts them (a :class:`~mcp_hub.downstream.gzip_answer.Deflated`), so the gzip
answer is assembled the same way, and the tests decode it against the
uncompressed answer.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from mcp_hub.downstream.gzip_answer import LEVEL, Deflated, combine_operator

__all__ = ["BOUNDARY_MASK", "MAX_SEGMENT_ENTRIES", "Layout", "SegmentDeflater"]

#: A segment ends after an entry whose ``hash`` has these bits zero: about 32 entries a segment.
BOUNDARY_MASK = 31
#: ... or after this many entries, whatever their hashes.
MAX_SEGMENT_ENTRIES = 128
_WINDOW = 32 * 1024
_EMPTY: tuple[bytes, ...] = ()


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

    def add(self, entry: bytes) -> None:
        """The next entry of the answer (its JSON, as spliced in)."""
        self._open.append(entry)
        if hash(entry) & BOUNDARY_MASK == 0 or len(self._open) >= MAX_SEGMENT_ENTRIES:
            self.segments.append(tuple(self._open))
            self._open = []

    def close(self, tail: bytes) -> Layout:
        """The bytes after the last entry; the layout is complete."""
        if self._open:
            self.segments.append(tuple(self._open))
            self._open = []
        self.tail = tail
        return self

    def join(self) -> bytes:
        """The answer's bytes (what the layout describes; the tests compare the two)."""
        return self.head + b",".join(e for segment in self.segments for e in segment) + self.tail


def _deflate(data: bytes, zdict: bytes | None, level: int) -> bytes:
    compressor = (zlib.compressobj(level, zlib.DEFLATED, -15, zdict=zdict) if zdict
                  else zlib.compressobj(level, zlib.DEFLATED, -15))
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


class SegmentDeflater:
    """Deflates laid-out answers, keeping the segments of the last few for the next ones.

    Blocking, and not thread-safe: it runs in the one low-priority thread
    (:mod:`mcp_hub.low_priority`), where zlib works without the GIL.
    """

    def __init__(self, level: int = LEVEL, keep: int = 8) -> None:
        self.level = level
        #: How many recent deflations' segments are kept.
        self.keep = keep
        self._cache: dict[tuple[tuple[bytes, ...], tuple[bytes, ...], bool], bytes] = {}
        self._recent: list[set[tuple[tuple[bytes, ...], tuple[bytes, ...], bool]]] = []
        #: Segments deflated so far (cache misses); the tests and the benchmark read it.
        self.deflated_segments = 0
        #: Segments found deflated already.
        self.reused_segments = 0

    def deflate(self, answer: bytes, layout: Layout) -> Deflated:
        """``answer`` (which ``layout`` describes) as non-final deflate blocks ending byte-aligned."""
        parts = [_deflate(layout.head, None, self.level)]
        used: set[tuple[tuple[bytes, ...], tuple[bytes, ...], bool]] = set()
        previous: tuple[bytes, ...] = _EMPTY
        previous_raw = b""
        last = len(layout.segments) - 1
        for index, segment in enumerate(layout.segments):
            key = (previous, segment, index == last)
            used.add(key)
            data = self._cache.get(key)
            raw = b""
            if data is None:
                raw = b",".join(segment) + (b"" if index == last else b",")
                if not previous_raw and previous:
                    previous_raw = b",".join(previous) + b","
                data = _deflate(raw, previous_raw[-_WINDOW:] if previous else None, self.level)
                self._cache[key] = data
                self.deflated_segments += 1
            else:
                self.reused_segments += 1
            parts.append(data)
            previous, previous_raw = segment, raw
        parts.append(_deflate(layout.tail, None, self.level))
        self._remember(used)
        blocks = b"".join(parts)
        return Deflated(blocks, zlib.crc32(answer), len(answer), combine_operator(len(answer)))

    def _remember(self, used: set[tuple[tuple[bytes, ...], tuple[bytes, ...], bool]]) -> None:
        """Keep the segments of the last ``keep`` deflations, and no others."""
        self._recent.append(used)
        if len(self._recent) > self.keep:
            self._recent.pop(0)
        live = set().union(*self._recent)
        for key in [k for k in self._cache if k not in live]:
            del self._cache[key]
