"""What the hub advertises: its own capabilities merged with its upstreams'.

``initialize`` (2025 clients) and ``server/discover`` (2026-07-28 clients) both
take their capabilities from the SDK's ``Server.get_capabilities``; the hub's
server passes them through :func:`merge_upstreams` so that both eras are told
the same thing, and only what the hub really serves:

* ``tools`` always (the hub's own tools), ``logging`` always (the hub answers
  ``logging/setLevel`` and forwards upstream log messages);
* ``prompts`` and ``resources`` when at least one upstream offers them;
* ``resources.subscribe`` when at least one upstream accepts subscriptions (the
  hub forwards a subscription to the upstream that owns the resource: as
  ``resources/subscribe`` to a 2025-era upstream, in the filter of its listen
  stream to a 2026-07-28 one);
* ``completions`` when at least one upstream offers them (the hub forwards
  ``completion/complete`` to the owner of the prompt or template);
* ``tasks`` (2025-11-25: task-augmented ``tools/call``, ``tasks/list``, ``tasks/cancel``)
  when at least one upstream runs tool calls as tasks (the hub routes every
  ``tasks/*`` request to the upstream that owns the task: :mod:`mcp_hub.hub.tasks`);
* ``listChanged`` on every list the hub advertises: it forwards every change;
* ``extensions``: each extension the hub passes on
  (:data:`mcp_hub.protocol.apps.RELAYED_EXTENSIONS`, MCP Apps) that at least one usable
  upstream advertises, with the settings of the first such upstream in file
  order (:func:`upstream_extensions`); and Agent Skills
  (``io.modelcontextprotocol/skills``, :mod:`mcp_hub.protocol.skills`) when a usable
  upstream serves it (declared, or found by asking a 2025 upstream:
  :mod:`mcp_hub.upstream.skills_probe`), ``directoryRead`` only when every such
  upstream serves it.
  Extensions the hub does not pass on are never advertised, whoever offers them.

``server/discover`` waits, like the lists, for the upstreams' first
connection attempts (never past the start-up deadline:
:class:`DiscoverAfterStartup`); so does the first ``initialize`` over
stdio (the stdio runner answers it once the hub is ready). An upstream still on its first attempt
after that counts as offering everything it might (its capabilities are not
known yet); a parked, failed or disabled upstream counts as offering nothing.
The answer is computed per request, so it follows upstreams that come, go or
change with a reload.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

from mcp_hub.protocol.apps import RELAYED_EXTENSIONS, UI_EXTENSION, UI_SCHEME
from mcp_hub.protocol.skills import SKILLS_EXTENSION, merged_settings, skills_settings

__all__ = ["DiscoverAfterStartup", "merge_upstreams", "upstream_extensions", "upstream_features"]


#: The features an upstream contributes to the hub's own capabilities.
FEATURES = ("prompts", "resources", "subscribe", "completions", "tasks")


#: The hub's ``tasks`` capability: it serves all of it once an upstream runs tool tasks.
TASKS = types.ServerTasksCapability(
    list=types.TasksListCapability(), cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())))


def upstream_features(connections: Iterable[Any]) -> set[str]:
    """Which of :data:`FEATURES` at least one upstream offers (or may, while connecting)."""
    found: set[str] = set()
    for conn in connections:
        caps: types.ServerCapabilities | None = getattr(conn, "capabilities", None)
        state = str(getattr(getattr(conn, "state", None), "value", ""))
        if caps is None:
            if state == "connecting":
                found.update(FEATURES)
            continue
        if state in ("disabled", "parked"):
            continue
        if caps.prompts is not None:
            found.add("prompts")
        if caps.resources is not None:
            found.add("resources")
            if caps.resources.subscribe:
                found.add("subscribe")
        if caps.completions is not None:
            found.add("completions")
        if caps.tasks is not None and caps.tasks.requests is not None \
                and caps.tasks.requests.tools is not None:
            found.add("tasks")
    return found


def upstream_extensions(connections: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The extensions the hub passes on that a ready upstream advertises, by identifier.

    Only an upstream whose capabilities are known counts (one still connecting
    may offer nothing); the first upstream (file order) that offers an extension
    gives its settings. A handshake-era (2025) upstream cannot say it offers
    extensions (its ``initialize`` answer has no such field), so one that lists a
    ``ui://`` resource counts as offering MCP Apps, with no settings.
    """
    found: dict[str, dict[str, Any]] = {}
    skills: list[dict[str, Any]] = []
    for conn in connections:
        caps: types.ServerCapabilities | None = getattr(conn, "capabilities", None)
        state = str(getattr(getattr(conn, "state", None), "value", ""))
        if caps is None or state in ("disabled", "parked"):
            continue
        declared = skills_settings(conn)
        if declared is not None:
            skills.append(declared)
        for identifier, settings in (caps.extensions or {}).items():
            if identifier in RELAYED_EXTENSIONS and identifier not in found:
                found[identifier] = dict(settings)
        if UI_EXTENSION not in found and any(
                str(r.uri).startswith(UI_SCHEME) for r in getattr(conn, "resources", ())):
            found[UI_EXTENSION] = {}
    merged = merged_settings(skills)
    if merged is not None:
        found[SKILLS_EXTENSION] = merged
    return found


def merge_upstreams(own: types.ServerCapabilities, features: set[str],
                    extensions: dict[str, dict[str, Any]] | None = None
                    ) -> types.ServerCapabilities:
    """The hub's capabilities ``own``, narrowed to what the upstreams let it serve,
    with the upstreams' passed-on ``extensions``."""
    update: dict[str, Any] = {}
    if extensions:
        update["extensions"] = {**(own.extensions or {}), **extensions}
    if "prompts" not in features:
        update["prompts"] = None
    if "resources" not in features:
        update["resources"] = None
    elif own.resources is not None:
        subscribe = bool(own.resources.subscribe) and "subscribe" in features
        update["resources"] = own.resources.model_copy(update={"subscribe": subscribe})
    if "completions" not in features:
        update["completions"] = None
    if "tasks" in features:
        update["tasks"] = TASKS
    return own.model_copy(update=update)



class DiscoverAfterStartup:
    """Server middleware: ``server/discover`` waits for the upstreams' first connects."""

    def __init__(self, wait_lists: Callable[[], Awaitable[None]]) -> None:
        self.wait_lists = wait_lists

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                       ) -> HandlerResult:
        if ctx.method == "server/discover":
            await self.wait_lists()
        return await call_next(ctx)
