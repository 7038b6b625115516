"""The ``ttlMs``/``cacheScope`` the hub puts on its own lists (2026-07-28 clients).

A 2026-07-28 client may keep a list for ``ttlMs`` and, with ``cacheScope:
"public"``, share it across authorization contexts. What the hub can honestly
promise follows from how it learns of changes:

* **ttlMs.** The hub tells clients of every change it sees (``list_changed``,
  on ``subscriptions/listen`` for these clients), so a list stays valid until a
  change the hub *cannot* see. Every upstream that contributes to the list
  (live, and offering that kind) must therefore either advertise ``listChanged``
  (its changes are pushed to the hub) or carry a ``ttlMs`` of its own (the hub
  re-lists it when that has passed, :mod:`mcp_hub.upstream.list_hints`): the
  hub's ``ttlMs`` is then ``[hub] list_ttl_ms`` (default 60 s; 0 turns hints off),
  lowered to the shortest upstream ``ttlMs`` and, for tools gated by a
  ``check_fn``, to the 30 s after which a gate is probed again. Otherwise, and
  until the first connects are done, it is 0 (immediately stale).
* **cacheScope.** ``"private"`` when the list was made for a signed-in identity
  (``[[access]]`` rules may give another identity another list) or when an
  upstream said its own list is private; ``"public"`` otherwise (the list is the
  same for everyone on that endpoint).

Older protocol versions do not carry these fields; the SDK's sieve drops them.
Reads what :class:`HintSource` names of the Hub (``upstreams``, ``registry``,
``config``); the serving side asks :meth:`mcp_hub.hub.core.Hub.list_hint`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcp_hub.config.model import HubConfig
from mcp_hub.hub.access import Caller
from mcp_hub.registry.definitions import CHECK_FN_TTL_SECONDS
from mcp_hub.registry.tool_registry import ToolRegistry

if TYPE_CHECKING:
    from mcp_hub.upstream import UpstreamManager

__all__ = ["HintSource", "ListHintValue", "hint_fields", "list_hint"]


class HintSource(Protocol):
    """What the hints are worked out from (the Hub has these parts)."""

    @property
    def config(self) -> HubConfig: ...
    @property
    def upstreams(self) -> UpstreamManager: ...
    @property
    def registry(self) -> ToolRegistry: ...

ListHintValue = tuple[int, Literal["public", "private"]]
_FEATURE = {"tools": "tools", "prompts": "prompts", "resources": "resources",
            "templates": "resources"}


def _pushes_changes(conn: Any, feature: str) -> bool:
    capability = getattr(getattr(conn, "capabilities", None), feature, None)
    return bool(getattr(capability, "list_changed", False))


def list_hint(hub: HintSource, kind: str, caller: Caller, *, gated: bool | None = None) -> ListHintValue:
    """(ttlMs, cacheScope) for the ``kind`` list the hub answers ``caller`` now.

    ``gated``: whether some tool is gated by a ``check_fn`` (asked of the registry if None).
    """
    scope: Literal["public", "private"] = (
        "private" if caller.identity is not None or caller.attributes else "public")
    ttl = int(getattr(hub.config.hub, "list_ttl_ms", 0))
    if ttl <= 0 or not hub.upstreams.initial_done:
        ttl = 0
    feature = _FEATURE[kind]
    for conn in hub.upstreams.connections():
        if getattr(conn, "session", None) is None or not conn.supports(feature):
            continue
        hint = getattr(conn, "list_hints", {}).get(kind)
        if hint is not None and hint.scope != "public":
            scope = "private"
        if _pushes_changes(conn, feature):
            continue
        ttl = min(ttl, hint.ttl_ms) if hint is not None else 0
    if gated is None:
        gated = kind == "tools" and bool(hub.registry.definitions.availability_key()[1])
    if kind == "tools" and ttl > 0 and gated:
        ttl = min(ttl, int(CHECK_FN_TTL_SECONDS * 1000))
    return ttl, scope


def hint_fields(hint: ListHintValue) -> dict[str, Any]:
    """A hint as the keyword arguments of an SDK list result (``ttl_ms``, ``cache_scope``)."""
    ttl, scope = hint
    return {"ttl_ms": ttl, "cache_scope": scope}
