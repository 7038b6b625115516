"""On-disk vectors keyed by a hash of what they embed, so a restart re-embeds nothing.

:class:`VectorStore` is an append-only file of ``(key, float32 vector)`` records:
a new vector costs one small append, loading is one read, and a torn last
record (a crash mid-write) is ignored. The keys are fixed-size bytes: a SHA-256
prefix of ``model id + text`` for tool embeddings, a token id for the static
encoder's token table. Whoever owns a store calls :meth:`VectorStore.compact`
now and then to drop keys no longer used.

The file starts with a header naming the vector width, so a store written for
another model shape is ignored (and rewritten) rather than misread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["EmbeddingCache", "VectorStore", "text_key"]

logger = logging.getLogger("mcp_hub.search")

_MAGIC = b"MCPHUBV1"
_HEADER = struct.Struct("<8sII")  # magic, key size, dim


def text_key(model_id: str, text: str) -> bytes:
    """16 bytes identifying ``text`` embedded by model ``model_id``."""
    return hashlib.sha256(f"{model_id}\0{text}".encode()).digest()[:16]


class VectorStore:
    """Fixed-size keys to float32 vectors of width ``dim``, kept in memory and on disk.

    ``path`` None keeps everything in memory (no cache directory configured).
    Thread-safe: index builds run in worker threads.
    """

    def __init__(self, path: Path | None, key_size: int, dim: int) -> None:
        self.path = path
        self.key_size = key_size
        self.dim = dim
        self._vectors: dict[bytes, bytes] = {}
        self._lock = threading.Lock()
        self._record = key_size + 4 * dim
        self.loaded = 0
        if path is not None:
            self._load(path)

    def __len__(self) -> int:
        return len(self._vectors)

    def __contains__(self, key: bytes) -> bool:
        return key in self._vectors

    def _load(self, path: Path) -> None:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            logger.warning("embedding cache %s unreadable (%s); starting empty", path, exc)
            return
        if len(data) < _HEADER.size or _HEADER.unpack_from(data) != (_MAGIC, self.key_size, self.dim):
            logger.info("embedding cache %s is for another model shape; starting empty", path)
            return
        rec, ks = self._record, self.key_size
        for off in range(_HEADER.size, len(data) - rec + 1, rec):
            self._vectors[data[off : off + ks]] = data[off + ks : off + rec]
        self.loaded = len(self._vectors)

    def keys(self) -> list[bytes]:
        """Every key held (in insertion order)."""
        return list(self._vectors)

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The raw float32 bytes for each key (None where missing)."""
        get = self._vectors.get
        return [get(k) for k in keys]

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Add (key, float32 bytes) pairs and append them to the file."""
        new = [(k, v) for k, v in items if k not in self._vectors]
        if not new:
            return
        with self._lock:
            self._vectors.update(new)
            if self.path is not None:
                self._append(new)

    def _append(self, items: Sequence[tuple[bytes, bytes]]) -> None:
        assert self.path is not None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size < _HEADER.size
            with self.path.open("wb" if fresh else "ab") as f:
                if fresh:
                    f.write(_HEADER.pack(_MAGIC, self.key_size, self.dim))
                f.write(b"".join(k + v for k, v in items))
        except OSError as exc:  # a read-only or full disk costs speed on the next start, nothing else
            logger.warning("embedding cache %s not written (%s)", self.path, exc)

    def compact(self, keep: Iterable[bytes]) -> None:
        """Forget every key not in ``keep`` and rewrite the file (atomically)."""
        with self._lock:
            kept = {k: self._vectors[k] for k in keep if k in self._vectors}
            if len(kept) == len(self._vectors):
                return
            self._vectors = kept
            if self.path is None:
                return
            tmp = self.path.with_suffix(f".tmp{os.getpid()}")
            try:
                with tmp.open("wb") as f:
                    f.write(_HEADER.pack(_MAGIC, self.key_size, self.dim))
                    f.write(b"".join(k + v for k, v in kept.items()))
                tmp.replace(self.path)
            except OSError as exc:
                logger.warning("embedding cache %s not compacted (%s)", self.path, exc)


class EmbeddingCache:
    """Tool embeddings by ``text_key(model, text)``: only texts never seen are encoded."""

    def __init__(self, store: VectorStore, model_id: str) -> None:
        self.store = store
        self.model_id = model_id
        self.encoded = 0  # texts sent to the encoder since start (what a test counts)

    def embed(self, texts: Sequence[str], encode: Any) -> NDArray[np.float32]:
        """Rows for ``texts``: from the cache, the rest from ``encode(list_of_texts)``."""
        import numpy as np

        keys = [text_key(self.model_id, t) for t in texts]
        found = self.store.get_many(keys)
        missing = sorted({i for i, v in enumerate(found) if v is None}, key=lambda i: keys[i])
        # One text may appear twice: encode it once.
        todo: dict[bytes, int] = {}
        for i in missing:
            todo.setdefault(keys[i], i)
        if todo:
            vecs = encode([texts[i] for i in todo.values()])
            self.encoded += len(todo)
            self.store.put_many((k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(todo, vecs, strict=True))
            found = self.store.get_many(keys)
        out = np.frombuffer(b"".join(v or b"" for v in found), dtype=np.float32)
        return out.reshape(len(texts), self.store.dim)
