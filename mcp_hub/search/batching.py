"""Encoding many texts in batches of similar length, shared by both encoders.

Sorting by token count before batching keeps padding short, which is most of
what a transformer forward pass costs on short tool descriptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["encode_by_length"]


def encode_by_length(tokenizer: Any, texts: Sequence[str], dim: int,
                     forward: Callable[[Sequence[Sequence[int]]], NDArray[np.float32]],
                     batch: int) -> NDArray[np.float32]:
    """The embeddings of ``texts`` in their order, ``forward`` run on batches of at most
    ``batch`` token sequences of similar length."""
    import numpy as np

    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        out[chunk] = forward([ids[i] for i in chunk])
    return out
