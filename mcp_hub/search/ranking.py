"""Ranking for ``tool_search``: BM25F over tool definitions, pure and in-memory.

A tool is a :class:`ToolDoc` with five fields: name parts, server label,
description, parameter names and parameter descriptions. A query term scores a
tool with BM25F: each field's term frequency is length-normalised with its own
``b``, weighted, summed, then saturated once with ``k1`` and multiplied by the
term's IDF. On top of that:

* query words are stemmed (Snowball) and expanded with general synonyms
  (:mod:`mcp_hub.search.vocabulary`), the expansions at a lower weight;
* a tool whose name parts are covered by the query gets a bonus (short names
  that say exactly what was asked beat long descriptions that mention it);
* a query that *is* a tool's name (exposed or raw) ranks that tool first.

Everything per (term, tool) is linear, so the index stores one pre-computed
float per posting and a search is a sum over the postings of the query terms:
about a millisecond over 10,000 tools. The field weights in
:data:`DEFAULT_WEIGHTS` were tuned on labelled queries
(``bench/search_eval/tune.py``).
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from mcp_hub.search.vocabulary import abbreviation, expansions, name_tokens, name_words, stem, tokenize

__all__ = [
    "DEFAULT_WEIGHTS",
    "IndexCache",
    "Match",
    "RankingWeights",
    "SearchIndex",
    "ToolDoc",
    "short_description",
]

MAX_DESCRIPTION_CHARS = 500
_EXACT_BONUS = 1e6
_SEPARATORS = ("__", "_", "-", ".", ":")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """Tunable parameters of the ranking (BM25F field weights and friends).

    The defaults come from ``bench/search_eval/tune.py`` (coordinate ascent on the
    tune split of the labelled queries; the held-out split is only reported).
    """

    k1: float = 1.5
    name: float = 3.0
    server: float = 2.0
    summary: float = 1.0
    description: float = 1.0
    param_names: float = 0.5
    param_descriptions: float = 0.3
    b_name: float = 0.75
    b_description: float = 0.75
    b_params: float = 0.75
    synonym: float = 0.4
    name_cover: float = 1.0


DEFAULT_WEIGHTS = RankingWeights()


@dataclass(frozen=True, slots=True)
class ToolDoc:
    """What the ranking knows about one tool."""

    name: str
    server: str = ""
    raw_name: str = ""
    description: str = ""
    params: tuple[tuple[str, str], ...] = ()
    required: tuple[str, ...] = ()
    input_schema: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_definition(cls, definition: Mapping[str, Any], server: str = "", raw_name: str | None = None) -> ToolDoc:
        """Build from an MCP tool definition (``name``, ``description``, ``inputSchema``…).

        Without ``raw_name``, a leading ``<server><separator>`` is stripped from
        the exposed name (the hub's default prefix policy).
        """
        name = str(definition.get("name", ""))
        schema = definition.get("inputSchema") or definition.get("parameters") or {}
        if not isinstance(schema, Mapping):
            schema = {}
        title = definition.get("title") or (definition.get("annotations") or {}).get("title")
        description = str(definition.get("description") or "")
        if title and str(title).lower() not in description.lower():
            description = f"{title}. {description}"
        required = schema.get("required") or ()
        return cls(
            name=name,
            server=server,
            raw_name=raw_name if raw_name is not None else _strip_prefix(name, server),
            description=description,
            params=tuple(_params(schema)),
            required=tuple(str(r) for r in required if isinstance(r, str)),
            input_schema=schema,
        )


@dataclass(frozen=True, slots=True)
class Match:
    """One search hit."""

    name: str
    server: str
    score: float
    description: str
    required: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape ``tool_search`` returns."""
        return {
            "name": self.name,
            "server": self.server,
            "description": self.description,
            "required": list(self.required),
        }


def short_description(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """``text`` with whitespace collapsed, cut at a word boundary to ``limit`` chars."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.") + "…"


def _strip_prefix(name: str, server: str) -> str:
    if not server:
        return name
    prefix = _UNSAFE.sub("_", server)
    for sep in _SEPARATORS:
        head = prefix + sep
        if name.startswith(head) and len(name) > len(head):
            return name[len(head) :]
    return name


def _params(schema: Mapping[str, Any], depth: int = 0) -> Iterable[tuple[str, str]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for pname, pschema in props.items():
        if not isinstance(pschema, Mapping):
            yield str(pname), ""
            continue
        yield str(pname), str(pschema.get("description") or pschema.get("title") or "")
        if depth < 1:
            nested = pschema.get("items") if pschema.get("type") == "array" else pschema
            if isinstance(nested, Mapping):
                yield from _params(nested, depth + 1)


_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])[.!?](?:\s|$)|\n\s*\n")


def _summary(description: str) -> str:
    """The first sentence of a description: what the tool does, before usage notes."""
    text = description.strip()
    m = _SENTENCE_END.search(text)
    return text[: m.start() if m else 300][:300]


class SearchIndex:
    """An immutable BM25F index over tools; build once per registry generation."""

    __slots__ = ("_docs", "_exact", "_postings", "_short", "weights")

    def __init__(
        self,
        docs: Sequence[ToolDoc],
        postings: dict[str, tuple[list[int], list[float]]],
        exact: dict[str, list[int]],
        weights: RankingWeights,
    ) -> None:
        self._docs = docs
        self._postings = postings
        self._exact = exact
        self._short: dict[int, str] = {}
        self.weights = weights

    def __len__(self) -> int:
        return len(self._docs)

    @property
    def docs(self) -> Sequence[ToolDoc]:
        return self._docs

    @classmethod
    def build(cls, tools: Iterable[ToolDoc], weights: RankingWeights = DEFAULT_WEIGHTS) -> SearchIndex:
        """Index ``tools`` (their order is kept for ties)."""
        docs = list(tools)
        w = weights
        known_words = _known_words(docs)
        fields: list[tuple[Counter[str], ...]] = []
        name_sets: list[set[str]] = []
        server_sets: list[set[str]] = []
        for d in docs:
            server = set(name_tokens(d.server))
            name = [stem(x) for x in _split_compounds(name_words(d.raw_name or d.name), known_words)]
            pnames = [t for p, _ in d.params for t in name_tokens(p)]
            pdesc = [t for _, text in d.params for t in tokenize(text)]
            fields.append(
                (
                    Counter(name),
                    Counter(tokenize(_summary(d.description))),
                    Counter(tokenize(d.description)),
                    Counter(pnames),
                    Counter(pdesc),
                )
            )
            server_sets.append(server)
            # Name parts that only repeat the server label ("browser_", "firecrawl_")
            # say nothing about what the tool does.
            name_sets.append(set(name) - server or set(name))
        n = max(len(docs), 1)
        n_fields = 5
        avg = [max(sum(sum(f[i].values()) for f in fields) / n, 1.0) for i in range(n_fields)]
        field_w = (w.name, w.summary, w.description, w.param_names, w.param_descriptions)
        field_b = (w.b_name, w.b_description, w.b_description, w.b_params, w.b_params)

        df: Counter[str] = Counter()
        for f, srv in zip(fields, server_sets, strict=True):
            df.update(set().union(srv, *(c.keys() for c in f)))
        raw: dict[str, list[tuple[int, float]]] = {}
        for doc_id, f in enumerate(fields):
            lengths = [sum(c.values()) for c in f]
            norms = [1.0 - field_b[i] + field_b[i] * lengths[i] / avg[i] for i in range(n_fields)]
            cover = w.name_cover / len(name_sets[doc_id]) if name_sets[doc_id] else 0.0
            for term in set().union(server_sets[doc_id], *(c.keys() for c in f)):
                tf = sum(field_w[i] * f[i][term] / norms[i] for i in range(n_fields) if f[i][term])
                idf = math.log(1.0 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score = idf * tf * (w.k1 + 1.0) / (w.k1 + tf) if tf else 0.0
                # Naming the server ("... on GitHub") favours all its tools alike,
                # outside the saturation so it adds to what the tool matched.
                if term in server_sets[doc_id]:
                    score += w.server * idf
                if term in name_sets[doc_id]:
                    score += cover * idf
                if score:
                    raw.setdefault(term, []).append((doc_id, score))
        # Two flat lists per term: ints and floats are not tracked by the garbage
        # collector, a million (doc, score) tuples would be, and full collections
        # would then stall searches.
        postings = {t: ([d for d, _ in p], [x for _, x in p]) for t, p in raw.items()}

        exact: dict[str, list[int]] = {}
        for doc_id, d in enumerate(docs):
            for key in {d.name.lower(), (d.raw_name or d.name).lower()}:
                exact.setdefault(key, []).append(doc_id)
        return cls(docs, postings, exact, weights)

    def query_terms(self, query: str) -> dict[str, float]:
        """Stems of ``query`` with their weights (1 for asked, lower for synonyms)."""
        asked = dict.fromkeys(tokenize(query), 1.0)
        if not asked:  # a query of stop words only: keep its words rather than nothing
            asked = dict.fromkeys(name_tokens(query), 1.0)
        for term in list(asked):
            for full in abbreviation(term):
                asked.setdefault(full, 1.0)
        terms = dict(asked)
        if self.weights.synonym > 0:
            for term in asked:
                for other in expansions(term):
                    if other not in terms:
                        terms[other] = self.weights.synonym
        return terms

    def search(self, query: str, limit: int = 5) -> list[Match]:
        """The ``limit`` best tools for ``query``, best first; tools with score 0 are left out."""
        if limit <= 0 or not self._docs:
            return []
        scores = self.scores(query)
        # nlargest with a C-level key is the fast path; re-sort a few more than asked so
        # that ties go to the tool listed first, whatever order the terms came in.
        top = heapq.nlargest(limit + 8, scores.items(), key=itemgetter(1))
        top.sort(key=lambda kv: (-kv[1], kv[0]))
        return [self.match(doc_id, score) for doc_id, score in top[:limit] if score > 0]

    def scores(self, query: str) -> dict[int, float]:
        """Lexical score per doc id for every tool ``query`` touches (exact names score 1e6 more)."""
        scores: dict[int, float] = {}
        get = scores.get
        for term, qw in self.query_terms(query).items():
            plist = self._postings.get(term)
            if plist is None:
                continue
            if qw == 1.0:
                for doc_id, s in zip(*plist, strict=True):
                    scores[doc_id] = get(doc_id, 0.0) + s
            else:
                for doc_id, s in zip(*plist, strict=True):
                    scores[doc_id] = get(doc_id, 0.0) + qw * s
        for key in _exact_keys(query):
            for doc_id in self._exact.get(key, ()):
                scores[doc_id] = get(doc_id, 0.0) + _EXACT_BONUS
        return scores

    def postings(self, term: str) -> tuple[list[int], list[float]] | None:
        """Doc ids and scores of ``term``, for scoring every tool at once elsewhere."""
        return self._postings.get(term)

    def exact_docs(self, query: str) -> list[int]:
        """Tools named by ``query``, once per name form that matched (each adds 1e6)."""
        return [doc_id for key in _exact_keys(query) for doc_id in self._exact.get(key, ())]

    def match(self, doc_id: int, score: float) -> Match:
        """The search hit for tool ``doc_id`` (descriptions shortened once, then cached)."""
        d = self._docs[doc_id]
        short = self._short.get(doc_id)
        if short is None:
            short = self._short[doc_id] = short_description(d.description)
        return Match(d.name, d.server, round(score, 4), short, d.required)


def _exact_keys(query: str) -> set[str]:
    q = query.strip().strip("`'\"").lower()
    keys = {q}
    # "server/tool", "server.tool" and "server:tool" name the tool too.
    for sep in ("/", "."):
        if sep in q:
            keys.add(q.rsplit(sep, 1)[1])
    return keys


def _known_words(docs: Sequence[ToolDoc]) -> set[str]:
    words: set[str] = set()
    for d in docs:
        words.update(w.lower() for w in re.findall(r"[A-Za-z]{3,}", d.description))
    return words


def _split_compounds(words: list[str], known: set[str]) -> list[str]:
    """Also split run-together name parts ("sequentialthinking") into known words."""
    out: list[str] = []
    for word in words:
        out.append(word)
        if len(word) < 8 or word in known:
            continue
        for i in range(3, len(word) - 2):
            if word[:i] in known and word[i:] in known:
                out.extend((word[:i], word[i:]))
                break
    return out


class IndexCache:
    """A small LRU of built indexes, keyed by whatever identifies the tool set
    (the registry generation, plus anything else that changes the catalog)."""

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._items: OrderedDict[Hashable, SearchIndex] = OrderedDict()

    def get(self, key: Hashable, build: Callable[[], SearchIndex]) -> SearchIndex:
        """The index for ``key``, built by ``build()`` on a miss."""
        index = self._items.get(key)
        if index is not None:
            self._items.move_to_end(key)
            return index
        index = build()
        self._items[key] = index
        while len(self._items) > self._size:
            self._items.popitem(last=False)
        return index

    def clear(self) -> None:
        self._items.clear()
