"""Fusing the lexical ranking with embedding similarity into one order.

Each tool's hybrid score is a weighted sum of its lexical score divided by the
best lexical score of the query (so 0..1, whatever the query's length) and its
cosine similarity to the query (clipped at 0); a tool that no query word
matched must be similar enough on its own (``min_semantic``). A query that is exactly a
tool's name keeps that tool first, as in lexical ranking. Candidates are the
best ``depth`` tools of either ranking, so a tool the words miss entirely can
still come first on meaning. The weights were fitted on the tuning queries
(``bench/search_eval/semantic.py --fit``); the blind queries only report them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["DEFAULT_FUSION", "EXACT_SCORE", "FusionWeights", "fuse", "fuse_dense"]

#: Lexical scores at or above this mean "the query is this tool's name".
EXACT_SCORE = 1e6


@dataclass(frozen=True, slots=True)
class FusionWeights:
    """``semantic`` weighs cosine similarity, ``1 - semantic`` the normalised lexical score.

    ``semantic`` serves the static vectors, ``semantic_transformer`` the full
    transformer: its cosines say more about meaning, so they earn more weight.
    Both were fitted on the tuning queries (the original set and the harder
    one written in the blind set's style), never on the blind set.
    """

    semantic: float = 0.7
    semantic_transformer: float = 0.9
    depth: int = 50
    #: A tool no query word matched needs at least this cosine to be a hit at all, so
    #: that a query about something the catalog lacks still gets "no match".
    min_semantic: float = 0.35
    #: The same for the full transformer, whose cosines run lower. Both are the 5th
    #: percentile of the cosine between a tuning query and its best correct tool
    #: (static vectors 0.341, transformer 0.232).
    min_semantic_transformer: float = 0.23


DEFAULT_FUSION = FusionWeights()


def fuse(
    lexical: Mapping[int, float],
    cosine: NDArray[np.float32],
    limit: int,
    weights: FusionWeights = DEFAULT_FUSION,
) -> list[tuple[int, float]]:
    """The ``limit`` best (doc id, hybrid score) pairs, best first, ties by doc id."""
    import numpy as np

    if limit <= 0 or len(cosine) == 0:
        return []
    w = weights.semantic
    depth = max(weights.depth, limit)
    ordinary = [s for s in lexical.values() if s < EXACT_SCORE]
    top_lex = max(ordinary, default=0.0) or 1.0
    candidates = set(heapq.nlargest(depth, lexical, key=lexical.__getitem__))
    if len(cosine) > depth:
        candidates.update(int(i) for i in np.argpartition(-cosine, depth)[:depth])
    else:
        candidates.update(range(len(cosine)))
    scored: list[tuple[int, float]] = []
    for doc in candidates:
        lex = lexical.get(doc, 0.0)
        if lex <= 0 and cosine[doc] < weights.min_semantic:
            continue
        score = w * max(float(cosine[doc]), 0.0) + (1.0 - w) * min(lex / top_lex, 1.0)
        if lex >= EXACT_SCORE:
            score += 1.0
        if score > 0:
            scored.append((doc, score))
    top = heapq.nlargest(limit + 8, scored, key=itemgetter(1))
    top.sort(key=lambda kv: (-kv[1], kv[0]))
    return top[:limit]


def fuse_dense(
    lexical: NDArray[np.float64],
    cosine: NDArray[np.float32],
    limit: int,
    weights: FusionWeights = DEFAULT_FUSION,
) -> list[tuple[int, float]]:
    """:func:`fuse` over a dense lexical score vector, computed for all tools at once.

    Same candidates (the best ``depth`` of either ranking), same scores and the
    same order (score, then doc id); only the loops are numpy's.
    """
    import numpy as np

    n = len(cosine)
    if limit <= 0 or n == 0:
        return []
    w = weights.semantic
    depth = max(weights.depth, limit)
    exact = lexical >= EXACT_SCORE
    ordinary = np.where(exact, 0.0, lexical)
    top_lex = float(ordinary.max()) or 1.0
    candidate = np.zeros(n, dtype=bool)
    for column, floor in ((lexical, 0.0), (cosine, -np.inf)):
        top = np.argpartition(-column, depth)[:depth] if n > depth else np.arange(n)
        candidate[top[column[top] > floor]] = True
    candidate &= (lexical > 0) | (cosine >= weights.min_semantic)
    score = w * np.maximum(cosine.astype(np.float64), 0.0) + (1.0 - w) * np.minimum(lexical / top_lex, 1.0)
    score += exact
    candidate &= score > 0
    ids = np.flatnonzero(candidate)
    if not len(ids):
        return []
    picked = score[ids]
    if len(ids) > limit:
        kth = np.partition(picked, len(ids) - limit)[len(ids) - limit]
        keep = picked >= kth  # every tie at the cut stays, then (score, id) decides
        ids, picked = ids[keep], picked[keep]
    order = np.lexsort((ids, -picked))[:limit]
    return [(int(ids[i]), float(picked[i])) for i in order]
