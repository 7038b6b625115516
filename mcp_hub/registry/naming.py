"""Exposed-name policy for upstream tools and prompts.

Common MCP clients only accept tool names matching ``^[A-Za-z0-9_-]{1,64}$``, so
every name the hub exposes is ``prefix + separator + raw`` with other characters
replaced by ``_`` and, when too long, shortened deterministically: the head of the
name plus ``_`` and 8 hex digits of the SHA-1 of the full unsanitised name. The
same input always gives the same output, across runs and machines.

A name that already starts with its server's prefix is not prefixed twice
(``[hub] dedupe_prefix``, on by default): server ``git``'s tool ``git_add`` is
``git_add``, not ``git_git_add``, and server ``fetch``'s tool ``fetch`` is
``fetch``. Every such name still begins with the prefix (or is the prefix), so it
stays in the server's own part of the namespace. Within one server, the plain
rule wins a tie: when the server also has ``add`` (exposed ``git_add``), its
``git_add`` keeps the old ``git_git_add``, so two tools never share a name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection

__all__ = ["UPSTREAM_TOOLSET_PREFIX", "exposed_name", "exposed_prompt_name", "is_upstream_toolset",
           "repeats_prefix", "sanitize_name", "server_of_toolset", "upstream_toolset"]

#: Every upstream server's tools live in the toolset ``mcp-<server>``.
UPSTREAM_TOOLSET_PREFIX = "mcp-"


def upstream_toolset(server: str) -> str:
    """The toolset of upstream ``server``'s tools: ``mcp-<server>``."""
    return UPSTREAM_TOOLSET_PREFIX + server


def is_upstream_toolset(toolset: str) -> bool:
    return toolset.startswith(UPSTREAM_TOOLSET_PREFIX)


def server_of_toolset(toolset: str) -> str | None:
    """The upstream server of an ``mcp-<server>`` toolset (None for any other toolset)."""
    if toolset.startswith(UPSTREAM_TOOLSET_PREFIX):
        return toolset[len(UPSTREAM_TOOLSET_PREFIX):]
    return None

_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LEN = 8


def sanitize_name(name: str) -> str:
    """Replace every character outside ``[A-Za-z0-9_-]`` with ``_``."""
    return _INVALID.sub("_", name)


def repeats_prefix(prefix: str, raw: str, separator: str = "_",
                   siblings: Collection[str] = ()) -> bool:
    """Whether ``raw`` is exposed as itself under deduplication: it is ``prefix`` or starts
    with ``prefix + separator``, and no sibling (another name of the same server) is the
    rest of it, which would be exposed as the same name."""
    if not prefix:
        return False
    if raw == prefix:
        return True
    head = prefix + separator
    return raw.startswith(head) and len(raw) > len(head) and raw[len(head):] not in siblings


def exposed_name(prefix: str, raw: str, separator: str = "_", max_length: int = 64, *,
                 dedupe: bool = False, siblings: Collection[str] = ()) -> str:
    """The name a downstream client sees for upstream item ``raw`` of server ``prefix``.

    ``prefix == ""`` exposes the raw name alone. With ``dedupe`` a name that already
    starts with the prefix is not prefixed again (see :func:`repeats_prefix`; ``siblings``
    are the server's other names). The result is never empty, never longer than
    ``max_length`` and only uses ``[A-Za-z0-9_-]``.
    """
    if dedupe and repeats_prefix(prefix, raw, separator, siblings):
        prefix = ""
    full = f"{prefix}{separator}{raw}" if prefix else raw
    name = sanitize_name(full) or "_"
    if len(name) <= max_length:
        return name
    digest = hashlib.sha1(full.encode("utf-8")).hexdigest()[:_HASH_LEN]
    if max_length <= _HASH_LEN:
        return digest[:max(max_length, 1)]
    head = name[: max_length - _HASH_LEN - 1]
    return f"{head}_{digest}"


def exposed_prompt_name(prefix: str, raw: str, separator: str = "_", max_length: int = 64, *,
                        dedupe: bool = False, siblings: Collection[str] = ()) -> str:
    """Same policy as :func:`exposed_name`, for prompts."""
    return exposed_name(prefix, raw, separator, max_length, dedupe=dedupe, siblings=siblings)
