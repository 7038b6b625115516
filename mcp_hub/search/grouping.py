"""Folding near-duplicate search hits: the same operation offered by several servers.

Catalogs overlap: three SQL servers each have ``list_tables``, two docs servers
each ``search_docs``. Listed one after another they push distinct answers out
of the top results. :func:`group_matches` keeps the best-ranked of such a group
as the match and lists the others under ``also`` (name, server and what the
tool does in one sentence), so the top ``limit`` matches hold ``limit``
different operations and the reader still sees every server that offers one.

Two hits are near-duplicates when they come from different servers and their
names, stemmed and without the words of their server's label, are the same
words. That rule is deterministic and depends on the hits only, so the output
stays byte-stable for the same catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_hub.search.ranking import Match
from mcp_hub.search.vocabulary import name_tokens

__all__ = ["group_matches", "operation_key"]

_ALSO_CHARS = 160


def operation_key(match: Match) -> frozenset[str]:
    """The stemmed words of a tool's name that are not its server's words."""
    raw = match.name
    server_words = set(name_tokens(match.server))
    words = set(name_tokens(raw)) - server_words
    return frozenset(words or name_tokens(raw))


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    cut = text[: end + 1] if 0 < end < _ALSO_CHARS else text
    if len(cut) > _ALSO_CHARS:
        cut = cut[: _ALSO_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return cut


def group_matches(matches: Sequence[Match], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` distinct operations in ``matches`` (best first), as JSON dicts.

    A later hit that duplicates an earlier one from another server joins that
    one's ``also`` list instead of taking a place of its own.
    """
    groups: list[dict[str, Any]] = []
    heads: list[tuple[frozenset[str], set[str], dict[str, Any]]] = []
    for m in matches:
        key = operation_key(m)
        for head_key, servers, entry in heads:
            if key == head_key and m.server not in servers:
                servers.add(m.server)
                entry.setdefault("also", []).append(
                    {"name": m.name, "server": m.server, "description": _first_sentence(m.description)}
                )
                break
        else:
            if len(groups) == limit:
                continue
            entry = m.as_dict()
            groups.append(entry)
            heads.append((key, {m.server}, entry))
    return groups
