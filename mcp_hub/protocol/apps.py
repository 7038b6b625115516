"""MCP Apps (extension ``io.modelcontextprotocol/ui``) as the hub passes it on.

An app is a tool whose definition names a ``ui://`` resource in
``_meta.ui.resourceUri``; the host reads that resource (HTML) and renders it, and
the HTML calls its own server's tools through the host. In front of several
servers the hub keeps three things straight:

* **Addresses.** Two servers may both serve ``ui://app.html``. Every ``ui://``
  resource is listed under ``ui://SERVER/REST`` (``ui://app.html`` of server
  ``alpha`` becomes ``ui://alpha/app.html``), and ``_meta.ui.resourceUri`` in
  the server's tool definitions is rewritten the same way. A server name is a
  valid URI authority (``[A-Za-z0-9][A-Za-z0-9_.-]*``), so the first path
  segment after ``ui://`` always names the server and the rest is the upstream's
  own address: :func:`split_ui` is the exact inverse of :func:`namespaced_ui`.
* **Who may see a tool.** ``_meta.ui.visibility`` without ``"model"`` marks an
  app-only tool: the host lists it to its app, never to the model
  (:func:`is_app_only`). :func:`is_ui_tool` picks the tools the host needs with
  their ``_meta.ui`` whatever the hub's tool_search bridge hides.
* **Whose tool an app calls.** An app's HTML calls its server's tools by the
  server's own names (``refresh_data``), which the hub exposes prefixed
  (``alpha_refresh_data``). A name no tool of the hub has is taken as an app's
  call when exactly one app server has a tool of that own name; when several
  do, the one whose app this client session read last
  (:class:`RenderedApps`). The resolved call is the exposed tool's call: access
  rules, hooks, pins and audit see the hub's name.
* **Which extensions pass.** :data:`RELAYED_EXTENSIONS` are the extensions the
  hub understands well enough to pass on, with the settings its own upstream
  sessions declare as a client.

A standard-library leaf: every layer may import it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import Any

__all__ = [
    "APP_MIME_TYPE", "RELAYED_EXTENSIONS", "UI_EXTENSION", "UI_SCHEME", "RenderedApps",
    "app_session_key", "is_app_only", "is_ui_tool", "namespaced_tool_meta", "namespaced_ui",
    "split_ui",
]

#: The MCP Apps extension identifier.
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of an app's HTML.
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The scheme of app resources.
UI_SCHEME = "ui://"
#: Extensions the hub passes on (advertised when an upstream offers them, declared
#: upstream when the calling client declared them), with the settings the hub's own
#: upstream sessions declare.
RELAYED_EXTENSIONS: Mapping[str, Mapping[str, Any]] = {
    UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]},
    # The 2026-07-28 tasks extension: task ids and tasks/* are the hub's (mcp_hub.hub.tasks).
    "io.modelcontextprotocol/tasks": {},
}
#: The legacy flat key some servers still put next to (or instead of) ``_meta.ui``.
_LEGACY_RESOURCE_KEY = "ui/resourceUri"


def namespaced_ui(server: str, uri: str) -> str:
    """``uri`` as the hub lists it: ``ui://SERVER/REST`` for a ``ui://`` address of
    ``server``; any other URI unchanged."""
    if not uri.startswith(UI_SCHEME):
        return uri
    return f"{UI_SCHEME}{server}/{uri[len(UI_SCHEME):]}"


def split_ui(uri: str) -> tuple[str, str] | None:
    """(server, the upstream's own URI) of a namespaced ``ui://`` address; None for
    any other URI (or a ``ui://`` address with no path after the server)."""
    if not uri.startswith(UI_SCHEME):
        return None
    server, slash, rest = uri[len(UI_SCHEME):].partition("/")
    if not server or not slash or not rest:
        return None
    return server, UI_SCHEME + rest


def _ui_meta(definition: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = definition.get("_meta")
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    return ui if isinstance(ui, Mapping) else None


def is_ui_tool(definition: Mapping[str, Any]) -> bool:
    """Whether a tool definition belongs to an app (``_meta.ui`` names a resource or a
    visibility, or the legacy ``_meta["ui/resourceUri"]`` is set)."""
    ui = _ui_meta(definition)
    if ui is not None and ("resourceUri" in ui or "visibility" in ui):
        return True
    meta = definition.get("_meta")
    return isinstance(meta, Mapping) and isinstance(meta.get(_LEGACY_RESOURCE_KEY), str)


def is_app_only(definition: Mapping[str, Any]) -> bool:
    """Whether ``_meta.ui.visibility`` leaves the model out (the host shows the tool
    to its app only). No visibility means both, as the extension says."""
    ui = _ui_meta(definition)
    if ui is None:
        return False
    visibility = ui.get("visibility")
    return isinstance(visibility, list | tuple) and "model" not in visibility


def namespaced_tool_meta(server: str, definition: dict[str, Any]) -> dict[str, Any]:
    """``definition`` (a fresh dict the caller owns) with its ``ui://`` resource
    addresses under ``server``'s namespace; unchanged when it names none."""
    meta = definition.get("_meta")
    if not isinstance(meta, Mapping):
        return definition
    new_meta = dict(meta)
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        new_meta["ui"] = {**ui, "resourceUri": namespaced_ui(server, ui["resourceUri"])}
    legacy = meta.get(_LEGACY_RESOURCE_KEY)
    if isinstance(legacy, str):
        new_meta[_LEGACY_RESOURCE_KEY] = namespaced_ui(server, legacy)
    if new_meta == meta:
        return definition
    definition["_meta"] = new_meta
    return definition


def app_session_key(call: Any) -> Hashable | None:
    """The downstream session a call or read came on, as :class:`RenderedApps` keys it:
    its HTTP/SSE session id, the one stdio client, or None (a sessionless request)."""
    if call is None:
        return None
    session_id = getattr(call, "session_id", None)
    if session_id:
        return ("session", session_id)
    if getattr(call, "headers", None) is None and getattr(call, "transport", "") == "pipe":
        return "stdio"
    return None


class RenderedApps:
    """Which servers' apps each client session read, most recent last (bounded).

    At most ``sessions`` sessions (least recently active forgotten first) and
    ``per_session`` servers each; only routing hints, never a permission.
    """

    def __init__(self, sessions: int = 4096, per_session: int = 32) -> None:
        self._seen: OrderedDict[Hashable, list[str]] = OrderedDict()
        self._sessions = sessions
        self._per_session = per_session

    def note(self, key: Hashable | None, server: str) -> None:
        """Session ``key`` read an app of ``server``."""
        if key is None:
            return
        servers = self._seen.pop(key, [])
        if server in servers:
            servers.remove(server)
        servers.append(server)
        self._seen[key] = servers[-self._per_session:]
        while len(self._seen) > self._sessions:
            self._seen.popitem(last=False)

    def choose(self, key: Hashable | None, candidates: Mapping[str, str]) -> str | None:
        """The exposed name, among ``candidates`` (server → exposed name), of the server
        whose app session ``key`` read last; the only candidate when there is one."""
        if len(candidates) == 1:
            return next(iter(candidates.values()))
        for server in reversed(self._seen.get(key, ()) if key is not None else ()):
            if server in candidates:
                return candidates[server]
        return None
