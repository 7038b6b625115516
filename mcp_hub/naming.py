"""Exposed-name policy for upstream tools and prompts.

Common MCP clients only accept tool names matching ``^[A-Za-z0-9_-]{1,64}$``, so
every name the hub exposes is ``prefix + separator + raw`` with other characters
replaced by ``_`` and, when too long, shortened deterministically: the head of the
name plus ``_`` and 8 hex digits of the SHA-1 of the full unsanitised name. The
same input always gives the same output, across runs and machines.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["UPSTREAM_TOOLSET_PREFIX", "exposed_name", "exposed_prompt_name", "is_upstream_toolset",
           "sanitize_name", "server_of_toolset", "upstream_toolset"]

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


def exposed_name(prefix: str, raw: str, separator: str = "_", max_length: int = 64) -> str:
    """The name a downstream client sees for upstream item ``raw`` of server ``prefix``.

    ``prefix == ""`` exposes the raw name alone. The result is never empty, never
    longer than ``max_length`` and only uses ``[A-Za-z0-9_-]``.
    """
    full = f"{prefix}{separator}{raw}" if prefix else raw
    name = sanitize_name(full) or "_"
    if len(name) <= max_length:
        return name
    digest = hashlib.sha1(full.encode("utf-8")).hexdigest()[:_HASH_LEN]
    if max_length <= _HASH_LEN:
        return digest[:max(max_length, 1)]
    head = name[: max_length - _HASH_LEN - 1]
    return f"{head}_{digest}"


def exposed_prompt_name(prefix: str, raw: str, separator: str = "_", max_length: int = 64) -> str:
    """Same policy as :func:`exposed_name`, for prompts."""
    return exposed_name(prefix, raw, separator, max_length)
