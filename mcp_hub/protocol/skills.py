"""Agent Skills over MCP (extension ``io.modelcontextprotocol/skills``) as the hub passes it on.

A server that declares the extension answers ``skills/list`` and ``skills/get``
with skill entries (a ``SKILL.md`` URI, its frontmatter verbatim, and every file
of the skill with its ``digest`` and ``size``), serves the files through
``resources/read`` and, with ``directoryRead: true``, lists a directory's
children through ``resources/directory/read``. In front of several servers the
hub keeps them apart the way it keeps apps apart (:mod:`mcp_hub.protocol.apps`):

* **Addresses.** Two servers may both serve ``skill://refunds/SKILL.md``, two
  unrelated skills. Every ``skill://`` address of server ``S`` is listed, read
  and routed as ``skill://S/REST`` (:func:`namespaced_skill`): in
  ``resources/list``, resource templates, ``resources/read`` contents, skill
  entries (``uri`` and each ``resources[].uri``) and directory children. The
  server name becomes the first segment of the skill path (its organizational
  prefix), so the skill's name, its last path segment, stays what the
  frontmatter says; :func:`split_skill` is the exact inverse. A skill served
  under another scheme keeps its URI (first server in file order wins, as for
  any resource).
* **Content untouched.** ``frontmatter``, ``digest`` and ``size`` pass as the
  server sent them, and so do the bytes ``resources/read`` returns: a host's
  verification of a file against its entry holds through the hub.
* **Settings.** The hub declares the extension when an upstream the caller may
  use does, with ``directoryRead: true`` only when every such upstream declares
  it (:func:`merged_settings`): a client then may ask a directory of any skill
  the hub lists.
* **Lists.** ``skills/list`` is the listings of the caller's upstreams, each read
  to its end (:data:`MAX_PAGES` pages at most) and merged into one page, with the
  shortest ``ttlMs`` and ``private`` scope when any upstream's is
  (:func:`merged_freshness`).

A standard-library leaf: every layer may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from mcp_hub.protocol.apps import UI_SCHEME, namespaced_ui, split_ui

__all__ = [
    "DIRECTORY_MIME_TYPE", "MAX_PAGES", "SKILLS_EXTENSION", "SKILL_SCHEME", "merged_freshness",
    "merged_settings", "namespaced_children", "namespaced_entry", "namespaced_skill",
    "namespaced_uri", "skills_settings", "split_namespaced", "split_skill",
]

#: The skills extension identifier.
SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
#: The scheme of skill files.
SKILL_SCHEME = "skill://"
#: The MIME type of a directory resource (``resources/directory/read`` children).
DIRECTORY_MIME_TYPE = "inode/directory"
#: Pages of one upstream's ``skills/list`` read for one downstream ``skills/list``.
MAX_PAGES = 50


def namespaced_skill(server: str, uri: str) -> str:
    """``uri`` as the hub lists it: ``skill://SERVER/REST`` for a ``skill://`` address
    of ``server``; any other URI unchanged."""
    if not uri.startswith(SKILL_SCHEME):
        return uri
    return f"{SKILL_SCHEME}{server}/{uri[len(SKILL_SCHEME):]}"


def split_skill(uri: str) -> tuple[str, str] | None:
    """(server, the upstream's own URI) of a namespaced ``skill://`` address; None for
    any other URI (or one with nothing after the server)."""
    if not uri.startswith(SKILL_SCHEME):
        return None
    server, slash, rest = uri[len(SKILL_SCHEME):].partition("/")
    if not server or not slash or not rest:
        return None
    return server, SKILL_SCHEME + rest


def namespaced_uri(server: str, uri: str) -> str:
    """Any address the hub namespaces per server (``ui://``, ``skill://``) under
    ``server``; every other URI unchanged."""
    if uri.startswith(UI_SCHEME):
        return namespaced_ui(server, uri)
    return namespaced_skill(server, uri)


def split_namespaced(uri: str) -> tuple[str, str] | None:
    """(server, own URI) of a namespaced ``ui://`` or ``skill://`` address, else None."""
    if uri.startswith(UI_SCHEME):
        return split_ui(uri)
    return split_skill(uri)


def namespaced_entry(server: str, entry: Any) -> Any:
    """A skill entry of ``server`` with its addresses namespaced: ``uri`` and each
    ``resources[].uri``; ``frontmatter``, ``digest``, ``size`` and everything else as
    sent. Anything that is not an object is returned as it came."""
    if not isinstance(entry, Mapping):
        return entry
    out = dict(entry)
    if isinstance(out.get("uri"), str):
        out["uri"] = namespaced_skill(server, out["uri"])
    files = out.get("resources")
    if isinstance(files, list):
        out["resources"] = [
            {**f, "uri": namespaced_skill(server, f["uri"])}
            if isinstance(f, Mapping) and isinstance(f.get("uri"), str) else f
            for f in files]
    return out


def namespaced_children(server: str, children: Any) -> Any:
    """``resources/directory/read`` children of ``server`` with their addresses namespaced."""
    if not isinstance(children, list):
        return children
    return [{**c, "uri": namespaced_skill(server, c["uri"])}
            if isinstance(c, Mapping) and isinstance(c.get("uri"), str) else c
            for c in children]


def skills_settings(conn: Any) -> dict[str, Any] | None:
    """The extension settings upstream connection ``conn`` serves (None: it does not):
    what its capabilities declare (2026-07-28), else what its ``skills_probe`` found
    (a 2025 session, :mod:`mcp_hub.upstream.skills_probe`)."""
    caps = getattr(conn, "capabilities", None)
    declared = (getattr(caps, "extensions", None) or {}).get(SKILLS_EXTENSION)
    if isinstance(declared, Mapping):
        return dict(declared)
    probed = getattr(getattr(conn, "skills_probe", None), "settings", None)
    return dict(probed) if isinstance(probed, Mapping) else None


def merged_settings(declared: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The hub's settings of the extension from those its upstreams declared (None:
    no upstream declares it). ``directoryRead`` only when every one of them does."""
    found = list(declared)
    if not found:
        return None
    if all(s.get("directoryRead") is True for s in found):
        return {"directoryRead": True}
    return {}


def merged_freshness(answers: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``ttlMs`` and ``cacheScope`` of a merged list: the shortest lifetime any part
    allows (0 when a part names none) and ``private`` when any part is private."""
    ttls: list[int] = []
    scope = "public"
    for answer in answers:
        ttl = answer.get("ttlMs")
        ttls.append(ttl if isinstance(ttl, int) and ttl >= 0 else 0)
        if answer.get("cacheScope") != "public":
            scope = "private"
    return {"ttlMs": min(ttls, default=0), "cacheScope": scope}
