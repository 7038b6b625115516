"""Hybrid ranking: the lexical index plus embedding similarity, or lexical alone with a reason.

:class:`SemanticEngine` owns what is shared by every caller's catalog: the
encoder (loaded once, lazily, in whichever worker thread needs it first), the
on-disk caches and the fallback reason. ``[tool_search] ranking`` chooses:

* ``lexical``: never load a model;
* ``hybrid``: load it; if that fails, rank lexically and warn once with the reason;
* ``auto`` (default): hybrid when the ``semantic`` extra and the model are
  there, else lexical, noted once at info level.

Either way the reason is in ``hub_status`` under ``tool_search.ranking``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_hub.search.dense_scores import DenseLexical, cosine_scores
from mcp_hub.search.embedding_cache import EmbeddingCache, VectorStore, text_key
from mcp_hub.search.encoder import DEFAULT_MODEL, Encoder, EncoderUnavailable, load_encoder
from mcp_hub.search.fusion import DEFAULT_FUSION, FusionWeights, fuse_dense
from mcp_hub.search.ranking import Match, SearchIndex, ToolDoc
from mcp_hub.search.vocabulary import name_words

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["HybridIndex", "SemanticEngine", "default_cache_dir", "engine_for", "ranking_status", "tool_text"]

logger = logging.getLogger("mcp_hub.search")

_DESCRIPTION_CHARS = 300
_QUERY_CACHE = 512


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/mcp-hub/embeddings`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-hub" / "embeddings"


def tool_text(doc: ToolDoc) -> str:
    """What is embedded for a tool: its name in words, its server, and what it does."""
    words = " ".join(name_words(doc.raw_name or doc.name))
    description = " ".join(doc.description.split())[:_DESCRIPTION_CHARS]
    return f"{words} ({doc.server}): {description}" if doc.server else f"{words}: {description}"


class SemanticEngine:
    """The encoder and caches behind hybrid ranking, or the reason there are none."""

    def __init__(
        self,
        ranking: str = "auto",
        model: str = DEFAULT_MODEL,
        cache_dir: Path | None = None,
        fusion: FusionWeights = DEFAULT_FUSION,
        transformer_max_tools: int = 1000,
    ) -> None:
        self.ranking = ranking
        self.transformer_max_tools = transformer_max_tools
        self.model = model
        self.cache_dir = cache_dir
        self.fusion = fusion
        self.reason: str | None = "ranking = lexical" if ranking == "lexical" else None
        self._encoder: Encoder | None = None
        self._cache: EmbeddingCache | None = None
        self._teacher: Encoder | None = None
        self._teacher_cache: EmbeddingCache | None = None
        self._last: EmbeddingCache | None = None
        self._tried = ranking == "lexical"
        self._lock = threading.Lock()

    def encoder(self) -> Encoder | None:
        """The encoder, loaded on first use; None (with :attr:`reason` set) when unavailable."""
        if self._tried:
            return self._encoder
        with self._lock:
            if not self._tried:
                self._load()
                self._tried = True
        return self._encoder

    def _load(self) -> None:
        from mcp_hub.search.static_embed import StaticEncoder

        try:
            teacher = load_encoder(self.model)
            tokens = VectorStore(self._file(f"tokens-{teacher.model_id}.bin"), 4, teacher.dim)
            encoder = StaticEncoder(teacher, tokens)  # type: ignore[arg-type]
        except EncoderUnavailable as exc:
            self.reason = str(exc)
            level = logging.WARNING if self.ranking == "hybrid" else logging.INFO
            logger.log(level, "tool_search ranks lexically: %s", self.reason)
            return
        self._cache = EmbeddingCache(
            VectorStore(self._file(f"tools-{encoder.model_id}.bin"), 16, encoder.dim), encoder.model_id
        )
        self._teacher = teacher
        self._teacher_cache = EmbeddingCache(
            VectorStore(self._file(f"tools-{teacher.model_id}.bin"), 16, teacher.dim), teacher.model_id
        )
        self._encoder = encoder
        logger.info("tool_search ranks hybrid with %s (%d cached tool embeddings)", self.model, len(self._cache.store))

    def _file(self, name: str) -> Path | None:
        return self.cache_dir / name if self.cache_dir is not None else None

    @property
    def teacher(self) -> Encoder | None:
        """The full transformer (None until loaded or when unavailable)."""
        return self._teacher

    @property
    def cache(self) -> EmbeddingCache | None:
        """The tool-vector cache the last :meth:`index` used (the static one before any)."""
        return self._last or self._cache

    def _pick(self, n_tools: int) -> tuple[Encoder, EmbeddingCache]:
        """The full transformer for catalogs of up to ``transformer_max_tools``, else static vectors.

        The transformer reads a text in context and ranks better (see
        docs/tool-search.md), but costs milliseconds per text where the static
        table costs microseconds: a query pays that once, a first build once per tool.
        """
        if n_tools <= self.transformer_max_tools and self._teacher is not None and self._teacher_cache is not None:
            return self._teacher, self._teacher_cache
        assert self._encoder is not None and self._cache is not None
        return self._encoder, self._cache

    def index(self, lexical: SearchIndex) -> SearchIndex | HybridIndex:
        """``lexical`` with embeddings of its tools, or ``lexical`` itself on fallback."""
        if self.encoder() is None or self._cache is None:
            return lexical
        texts = [tool_text(d) for d in lexical.docs]
        encoder, cache = self._pick(len(texts))
        matrix = cache.embed(texts, encoder.encode)
        store = cache.store
        if len(store) > 4 * len(texts) + 10_000:  # forget tools long gone, keep other callers' catalogs
            store.compact(text_key(encoder.model_id, t) for t in texts)
        self._last = cache
        return HybridIndex(lexical, matrix, self, encoder)

    def status(self) -> dict[str, Any]:
        """For ``hub_status``: what was asked, what runs, and why not hybrid."""
        active = "hybrid" if self._encoder is not None else ("lexical" if self._tried else "not loaded yet")
        out: dict[str, Any] = {"configured": self.ranking, "active": active}
        if self.reason:
            out["reason"] = self.reason
        if self._cache is not None:
            out["model"] = self.model
            out["transformer_max_tools"] = self.transformer_max_tools
            out["cached_embeddings"] = len(self._cache.store)
        return out


class HybridIndex:
    """A :class:`SearchIndex` whose ``search`` fuses lexical scores with cosine similarity."""

    def __init__(
        self, lexical: SearchIndex, matrix: NDArray[np.float32], engine: SemanticEngine, encoder: Encoder
    ) -> None:
        self.lexical = lexical
        self.encoder = encoder
        self.matrix = matrix
        self._dense = DenseLexical(lexical)
        self._engine = engine
        self._queries: OrderedDict[str, Any] = OrderedDict()

    def __len__(self) -> int:
        return len(self.lexical)

    @property
    def docs(self) -> Sequence[ToolDoc]:
        return self.lexical.docs

    def query_vector(self, query: str) -> Any:
        vec = self._queries.get(query)
        if vec is None:
            vec = self._queries[query] = self.encoder.encode([query])[0]
            while len(self._queries) > _QUERY_CACHE:
                self._queries.popitem(last=False)
        return vec

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """The ``limit`` best tools for ``query`` by fused score, best first."""
        if limit <= 0 or not len(self.lexical):
            return []
        try:
            cosine = cosine_scores(self.matrix, self.query_vector(query))
        except Exception as exc:  # e.g. the weights vanished while a new word piece needed them
            logger.warning("tool_search ranks this query lexically: %s: %s", type(exc).__name__, exc)
            return self.lexical.search(query, limit)
        weights = self._engine.fusion
        if self.encoder is self._engine.teacher:
            weights = replace(
                weights, semantic=weights.semantic_transformer, min_semantic=weights.min_semantic_transformer
            )
        ranked = fuse_dense(self._dense.scores(query), cosine, limit, weights)
        return [self.lexical.match(doc, score) for doc, score in ranked]


_ENGINES: dict[Hashable, SemanticEngine] = {}
_ENGINES_LOCK = threading.Lock()


def engine_for(settings: Any) -> SemanticEngine:
    """The process-wide engine for ``settings``' ranking, model and cache directory."""
    ranking = str(getattr(settings, "ranking", "auto"))
    model = str(getattr(settings, "model", None) or DEFAULT_MODEL)
    raw_dir = getattr(settings, "cache_dir", None)
    cache_dir = Path(raw_dir).expanduser() if raw_dir else default_cache_dir()
    max_tools = int(getattr(settings, "transformer_max_tools", 1000))
    key = (ranking, model, str(cache_dir), max_tools)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = SemanticEngine(ranking, model, cache_dir, transformer_max_tools=max_tools)
        return engine


def ranking_status(settings: Any) -> dict[str, Any]:
    """``tool_search.ranking`` in ``hub_status``."""
    return engine_for(settings).status()
