"""Static token embeddings distilled from a sentence encoder: microseconds per query.

A transformer costs tens of milliseconds per query on a small CPU; a table of
one vector per token costs a lookup and a sum. This is the model2vec recipe
without its training dependencies: each vocabulary token is run through the
teacher encoder on its own (``[CLS] token [SEP]``, mean-pooled, as the teacher
pools sentences). A text's vector is the weighted sum of its word-piece vectors:

* weights follow Zipf's law on the vocabulary's frequency order (BERT's word
  pieces are listed from the most frequent, so ``log(1 + rank)`` down-weights
  "the" and "of" the way IDF would), punctuation weighs nothing;
* the mean and the top :data:`_REMOVED_COMPONENTS` principal directions of the
  :data:`_COMMON` most frequent tokens' vectors are removed ("all-but-the-top"):
  they say "this is English", not what a text is about.

Both are fixed by the model, not by the catalog, so a tool's vector depends on
its own text only and can be cached by a hash of that text.

Tokens are distilled lazily and kept on disk (:class:`VectorStore`, keyed by
token id): an index build distils the tokens its tool texts use, a query only
the tokens never seen before (usually none), and a restart distils nothing.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mcp_hub.search.embedding_cache import VectorStore

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from mcp_hub.search.encoder import MiniLMEncoder
    from mcp_hub.search.onnx_encoder import OnnxEncoder

__all__ = ["StaticEncoder"]

_ID = struct.Struct("<I")
_DISTIL_BATCH = 256
_COMMON = 2000
_REMOVED_COMPONENTS = 4
#: Store keys from here on hold derived rows (mean, principal directions), not token ids.
_DERIVED = 0xFFFFFF00


class StaticEncoder:
    """Texts to mean-of-token vectors, token vectors distilled from ``teacher`` on demand."""

    def __init__(self, teacher: MiniLMEncoder | OnnxEncoder, store: VectorStore) -> None:
        import numpy as np

        self._teacher = teacher
        self._store = store
        self._tok = teacher.tokenizer
        self._cls = self._tok.token_to_id("[CLS]")
        self._sep = self._tok.token_to_id("[SEP]")
        vocab = self._tok.get_vocab_size()
        self._table = np.zeros((vocab, teacher.dim), dtype=np.float32)
        self._have = np.zeros(vocab, dtype=bool)
        self._lock = threading.Lock()
        self.distilled = 0  # tokens run through the teacher since start
        keys = store.keys()
        for key, raw in zip(keys, store.get_many(keys), strict=True):
            (tid,) = _ID.unpack(key)
            if tid < vocab and raw is not None:
                self._table[tid] = np.frombuffer(raw, dtype=np.float32)
                self._have[tid] = True
        words = self._tok.get_vocab()
        first = words.get("the", 0)  # the first (most frequent) whole word of the vocabulary
        rank = np.maximum(np.arange(vocab) - first + 1, 1)
        wordlike = np.zeros(vocab, dtype=bool)
        for piece, tid in words.items():
            wordlike[tid] = piece.lstrip("#").isalnum() and not piece.startswith("[")
        self._weight = (np.log1p(rank) * wordlike).astype(np.float32)
        common = np.arange(first, min(first + _COMMON, vocab))
        self._ensure(common)
        self._mean, self._top = self._removed_directions(common)

    def _removed_directions(self, common: Any) -> tuple[Any, Any]:
        """The common tokens' mean and top principal directions, kept in the store.

        They depend on the teacher only; computing them (an eigen-decomposition)
        took most of a warm start's time on a loaded machine, so a start reads them.
        """
        import numpy as np

        keys = [_ID.pack(_DERIVED + i) for i in range(_REMOVED_COMPONENTS + 1)]
        raws = self._store.get_many(keys)
        if all(raw is not None for raw in raws):
            rows = np.stack([np.frombuffer(raw or b"", dtype=np.float32) for raw in raws])
            return rows[0].copy(), np.ascontiguousarray(rows[1:])
        mean = self._table[common].mean(0)
        # The top right singular vectors of the centred table are the top eigenvectors
        # of its 384 x 384 scatter matrix.
        centred = (self._table[common] - mean).astype(np.float64)
        _, vecs = np.linalg.eigh(centred.T @ centred)
        top = np.ascontiguousarray(vecs[:, ::-1][:, :_REMOVED_COMPONENTS].T.astype(np.float32))
        rows = np.vstack([mean[None, :], top]).astype(np.float32)
        self._store.put_many((k, r.tobytes()) for k, r in zip(keys, rows, strict=True))
        return mean, top

    @property
    def model_id(self) -> str:
        return f"static-zipf-abtt{_REMOVED_COMPONENTS}-{self._teacher.model_id}"

    @property
    def dim(self) -> int:
        return self._teacher.dim

    def _ensure(self, ids: Any) -> None:
        """Distil the tokens in ``ids`` that the table lacks (in batches), and store them."""
        import numpy as np

        missing = np.unique(ids[~self._have[ids]]) if len(ids) else ids
        if not len(missing):
            return
        with self._lock:
            missing = missing[~self._have[missing]]
            for start in range(0, len(missing), _DISTIL_BATCH):
                chunk = [int(t) for t in missing[start : start + _DISTIL_BATCH]]
                vecs = self._teacher.forward_ids([[self._cls, t, self._sep] for t in chunk])
                self._table[chunk] = vecs
                self._have[chunk] = True
                self.distilled += len(chunk)
                self._store.put_many((_ID.pack(t), v.tobytes()) for t, v in zip(chunk, vecs, strict=True))

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One L2-normalised row per text: the mean of its tokens' vectors."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tok.encode_batch(list(texts), add_special_tokens=False)
        rows = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
        self._ensure(np.concatenate(rows))
        for i, ids in enumerate(rows):
            w = self._weight[ids]
            total = float(w.sum())
            if total <= 0:
                continue
            v = w @ self._table[ids] - total * self._mean
            v -= (self._top @ v) @ self._top
            n = float(np.linalg.norm(v))
            if n > 0:
                out[i] = v / n
        return out
