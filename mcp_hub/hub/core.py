"""The Hub: owns the registry, the upstream connections and everything served.

``async with Hub(config) as hub:`` loads the builtin tools and plugins, starts
one supervised task per upstream server, and the change broadcaster. The
serving side (:mod:`mcp_hub.downstream`) only talks to the Hub: it lists what a
profile exposes and runs calls through the pipeline. Builtin tools reach it
through ``call.hub``.
"""

from __future__ import annotations

import difflib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc
from mcp import types

from mcp_hub import __version__
from mcp_hub.auth.audit import AuditLog, audit_fields
from mcp_hub.config.model import HubConfig, load_config
from mcp_hub.eras.held import LocalHeldRounds
from mcp_hub.errors import ConfigError, UnknownToolError
from mcp_hub.hub.access import EVERYONE, AccessControl, Caller, OpsView, as_caller
from mcp_hub.hub.diagnosis import rejected_tools
from mcp_hub.hub.drain import Drain
from mcp_hub.hub.list_freshness import ListHintValue, list_hint
from mcp_hub.hub.metrics import UNKNOWN_TOOL, Metrics
from mcp_hub.hub.open_calls import OpenCalls
from mcp_hub.hub.serving import UpstreamServing, reachable_upstreams
from mcp_hub.hub.sessions import ChangeKind, SessionTracker
from mcp_hub.hub.skill_serving import SkillServing
from mcp_hub.hub.startup import StartupGate
from mcp_hub.hub.task_owners import TaskOwners
from mcp_hub.hub.task_serving import TaskServing
from mcp_hub.hub.tasks import TaskBook, TaskForwarder
from mcp_hub.hub.tool_listing import ToolListing
from mcp_hub.pipeline import runtime
from mcp_hub.pipeline.builtin_binding import bound_builtins
from mcp_hub.pipeline.calls import handle_function_call, handle_unlisted_call
from mcp_hub.pipeline.context import CallContext
from mcp_hub.pipeline.discovery import discover_builtin_tools
from mcp_hub.pipeline.plugins import HookManager, PluginContext, load_plugins
from mcp_hub.plumbing.flights import Flights
from mcp_hub.protocol.apps import RenderedApps, app_session_key
from mcp_hub.protocol.log_levels import below_level, client_log_level
from mcp_hub.protocol.roots import ClientRoots
from mcp_hub.redact import Secrets, redact
from mcp_hub.redact import attach as attach_secrets
from mcp_hub.redact import detach as detach_secrets
from mcp_hub.registry.models import ToolModels
from mcp_hub.registry.naming import server_of_toolset
from mcp_hub.registry.steps import run_steps, run_steps_sliced
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.registry.tool_registry import registry as builtin_declarations
from mcp_hub.registry.toolsets import Toolsets
from mcp_hub.rewrite.profiles import ProfileRewrites, stacked
from mcp_hub.search.tool_search import ToolSearchBridge, plan_exposure, ranking_status
from mcp_hub.state import StateBackend, open_state
from mcp_hub.telemetry import reconfigure_telemetry, start_telemetry, stop_telemetry
from mcp_hub.upstream import UpstreamManager
from mcp_hub.upstream.oauth.attach import login_wanted, oauth_status
from mcp_hub.upstream.oauth.secretbox import load_key
from mcp_hub.upstream.peruser import PerUserServers, hub_connected
from mcp_hub.upstream.stdio import prespawn
from mcp_hub.upstream.stdio.prespawn import EarlyStarts

if TYPE_CHECKING:
    from mcp_hub.upstream import ServerConnection, UpstreamStatus
    from mcp_hub.upstream.peruser.service import ConnectAnswer

__all__ = ["Hub"]

logger = logging.getLogger(__name__)

#: What tool_search searches: (definitions, name -> server, availability key).
Catalog = tuple[list[dict[str, Any]], dict[str, str], Hashable]


def _server_of_toolset(toolset: str) -> str:
    return server_of_toolset(toolset) or toolset


#: How a rejection reason names the toolset holding the name.
_HOLDER = re.compile(r"toolset '([^']*)'")
_HELD_ELSEWHERE = "the name is held by another toolset"


def _reason_shown(reason: str, view: OpsView) -> str:
    """A rejection reason, unless it names a toolset ``view`` does not show."""
    hidden = any(not view.shows_server(_server_of_toolset(m)) for m in _HOLDER.findall(reason))
    return _HELD_ELSEWHERE if hidden else reason


def _upstream_status(st: Any, view: OpsView) -> dict[str, Any]:
    """One upstream's row in :meth:`Hub.status`, its last error redacted."""
    rejected = dict(getattr(st, "rejected_tools", {}) or {})
    return {
        "name": st.name,
        "state": str(getattr(st.state, "value", st.state)),
        "transport": st.transport,
        "tools": st.tools,
        "prompts": st.prompts,
        "resources": st.resources,
        "last_error": redact(st.last_error) if st.last_error else None,
        "reconnects": st.reconnects,
        "in_flight": st.in_flight,
        "rejected_tools": {name: _reason_shown(why, view) for name, why in rejected.items()},
        "since": st.state_since,
        "connect_ms": st.connect_ms,
    }


def _rejected_shown(rows: list[dict[str, Any]], view: OpsView) -> list[dict[str, Any]]:
    """The rejected tools of the servers ``view`` shows; a holder it does not show stays unnamed."""
    if view.full:
        return rows
    shown = []
    for row in rows:
        if not view.shows_server(_server_of_toolset(row["toolset"])):
            continue
        holder = row.get("held_by")
        if holder is not None and not view.shows_server(_server_of_toolset(holder)):
            row = {**row, "held_by": None, "reason": _HELD_ELSEWHERE}
        shown.append({**row, "reason": _reason_shown(row["reason"], view)})
    return shown


class Hub:
    """One MCP hub: registry + upstreams + change notifications, as a context manager.

    Its parts are objects it builds and holds, each given the other parts it uses:
    what ``tools/list`` shows (``listing``), prompts, resources and subscriptions
    (``upstream_serving``), tasks (``task_serving``), skills (``skill_serving``).
    The serving methods the transports call (:class:`mcp_hub.hub.interface.ServingHub`)
    hand each request to its part.
    """

    def __init__(
        self,
        config: HubConfig,
        *,
        registry: ToolRegistry | None = None,
        load_builtins: bool = True,
        builtins_dir: Path | None = None,
        load_plugin_modules: bool = True,
    ) -> None:
        self.config = config
        self._bridges: OrderedDict[Caller, ToolSearchBridge] = OrderedDict()
        # A caller's profiles → (the config it was built from, their tool rewrites).
        self._rewrites: dict[tuple[str, ...], tuple[HubConfig, ProfileRewrites | None]] = {}
        self.registry = registry if registry is not None else ToolRegistry()
        self.registry.allow_tool_override = config.hub.allow_tool_override
        self.hooks = HookManager()
        self.sessions = SessionTracker()
        self.metrics = Metrics()
        #: One JSON line per call and per denied request ([audit]; mcp_hub.auth.audit).
        self.audit = AuditLog(config.audit)
        self.version = __version__
        # OpenTelemetry traces and metrics of tool calls; a shared no-op when not configured.
        self.telemetry = start_telemetry(
            config.telemetry, service_version=__version__,
            known_tool=self._known_tool)
        self.started_at = time.time()
        self.plugins: list[str] = []
        #: This hub's secret values, redacted from every output while it is open.
        self.secrets = Secrets()
        #: Stdio servers the CLI started before this hub existed, taken over on enter.
        self.early = EarlyStarts()
        self.upstreams = UpstreamManager(
            hub_connected(config), self.registry, remember_secrets=self.secrets.add,
            adopt_early=self.early.adopt,
            on_change=self._on_upstream_change,
            on_announced=self._on_upstream_announce,
            on_resource_updated=self._on_resource_updated,
            on_log=self._on_upstream_log,
        )
        #: ``oauth_per_user`` servers: one upstream session per signed-in identity.
        self.per_user = PerUserServers(config, self.registry)
        #: This hub's toolsets: the builtin ones plus the composites of its config.
        self.toolsets = Toolsets()
        #: This hub's config and listener, as its builtin tools read them (mcp_hub.pipeline.runtime).
        self.runtime = runtime.Runtime(config)
        #: The one enforcement point for what each caller may reach.
        self.access = AccessControl(lambda: self.config, self.registry, self.upstreams,
                                    self.toolsets)
        #: What tools/list shows each caller, walked in steps (mcp_hub.hub.tool_listing).
        self.listing = ToolListing(self.registry, self.access, lambda: self.config,
                                   self.rewrites_for)
        self.bridge = self.bridge_for(EVERYONE)
        self.rendered_apps = RenderedApps()
        #: The one start-up deadline every request's wait is bounded by.
        self.startup = StartupGate(self.upstreams, self.registry, config.hub.startup_timeout,
                                   config.hub.tool_name_separator,
                                   dedupe=config.hub.dedupe_prefix)
        self._load_builtins = load_builtins
        self._builtins_dir = builtins_dir
        self._load_plugins = load_plugin_modules
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._tools_cache: OrderedDict[tuple[Any, ...], list[types.Tool]] = OrderedDict()
        #: tool_definitions_sliced's answers, and the ones being worked out.
        self._defs_cache: OrderedDict[tuple[Any, ...], list[dict[str, Any]]] = OrderedDict()
        self._defs_flights = Flights()
        self._tool_models = ToolModels()  # one Tool model per unchanged definition
        self._catalog_cache: dict[Caller, tuple[Hashable, Catalog]] = {}
        #: Calls in flight, and the bounded wait for them on SIGTERM (mcp_hub.hub.drain).
        self.drain = Drain()
        #: Calls by (HTTP session, request id), for cancelling undeliverable ones.
        self.open_calls = OpenCalls()
        #: The roots/list answer for upstreams asking outside a call (mcp_hub.protocol.roots).
        self.roots = ClientRoots(self.sessions.connections, self._file_roots,
                                 self.upstreams.roots_changed)
        self.upstreams.roots_provider = self.roots.answer
        #: Calls of 2026-07-28 clients waiting on input rounds (mcp_hub.eras.held).
        self.rounds = LocalHeldRounds(ttl=config.hub.input_round_ttl,
                                      max_rounds=config.hub.max_input_rounds)
        #: Prompts, resources, subscriptions, completion, logging levels (mcp_hub.hub.serving).
        self.upstream_serving = UpstreamServing(self.access, self.upstreams, self.startup,
                                                self.sessions, self.rendered_apps)
        #: Agent Skills requests (mcp_hub.hub.skill_serving).
        self.skill_serving = SkillServing(self.access, self.upstreams, self.startup)
        #: The upstreams' tasks the hub's clients started (mcp_hub.hub.tasks).
        self.tasks = TaskBook()
        #: State shared with other replicas ([state] url; embedded without one).
        self.state: StateBackend = open_state(config.state.url)
        self.per_user.state = self.state  # connect links and flows, shared by replicas
        #: Who owns each task, for every replica (mcp_hub.hub.task_owners).
        self.task_owners = TaskOwners(self.state)
        #: ``tasks/*`` under the hub's own task ids (mcp_hub.hub.task_serving).
        self.task_serving = TaskServing(self.tasks, self.task_owners, self.access, self.upstreams)
        self.upstreams.on_task_status = self.task_serving.status_changed

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Self:
        self.runtime.config = self.config
        self.secrets.add(self.config.secret_values)
        attach_secrets(self.secrets)
        self.early.take_over(prespawn.claim())
        if self._load_builtins:
            self._install_builtins()
        for name, ts in self.config.toolsets.items():
            self.toolsets.register_composite(name, ts.tools, ts.includes, ts.description)
        if self._load_plugins:
            self._install_plugins()
        self.registry.add_listener(self._on_registry_change)
        self.startup.restart(self.config.hub.startup_timeout)
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            tg = await stack.enter_async_context(anyio.create_task_group())
            self._tg = tg
            await tg.start(self.sessions.run)
            await stack.enter_async_context(self.state.running())
            await tg.start(self.rounds.run)
            await stack.enter_async_context(self.upstreams)
            await stack.enter_async_context(self.per_user)
            stack.callback(tg.cancel_scope.cancel)
        except BaseException:
            await stack.__aexit__(None, None, None)
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self.registry.remove_listener(self._on_registry_change)
        stack, self._stack = self._stack, None
        try:
            if stack is not None:
                # No shielding scope here: the task groups on the stack must be exited
                # inside the very cancel scope they were entered in.
                await stack.__aexit__(exc_type, exc, tb)
            await stop_telemetry(self.telemetry)
            self.audit.flush(2.0)  # the writer thread's last lines; bounded, and only at exit
        finally:
            detach_secrets(self.secrets)
            with anyio.CancelScope(shield=True):  # early processes nobody adopted
                await anyio.to_thread.run_sync(self.early.discard_all)
        return None

    def _install_builtins(self) -> None:
        discover_builtin_tools(self._builtins_dir)
        declared = builtin_declarations.snapshot().values()
        self.registry.register_many(bound_builtins(declared, self.runtime))

    def _install_plugins(self) -> None:
        settings = self.config.plugins

        def factory() -> PluginContext:
            return PluginContext(self.registry, self.hooks, dict(settings.settings))

        dirs = [Path(d).expanduser() for d in settings.dirs]
        group = "mcp_hub.plugins" if settings.entry_points else ""
        self.plugins = load_plugins(factory, dirs, entry_point_group=group)

    async def wait_ready(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until every upstream finished its first connect, or the start-up deadline
        (``startup_timeout`` after the hub started) passed; ``timeout`` overrides."""
        if timeout is None:
            await self.startup.wait_lists()
        else:
            await self.upstreams.wait_ready(timeout)

    def secret_key(self) -> bytes:
        """The hub's token key (``MCP_HUB_SECRET_KEY``, else the 0600 key file in the state
        dir): it signs connect links and seals stored tokens, flow records and the browser
        cookies, so replicas that share it accept each other's."""
        return load_key(self.config.state_path())

    def _file_roots(self) -> list[str]:
        """``[builtins.file] roots`` as absolute paths (relative ones: from the config's folder)."""
        source = self.config.source
        base = Path(source).parent if source is not None else Path.cwd()
        return [str(base / Path(raw).expanduser()) for raw in self.config.builtins.file.roots]

    def watch_client_roots(self, connection: Any) -> None:
        """Ask a client for its roots in the background (its handshake ended, or its
        roots changed); upstreams hear of a changed answer."""
        if self._tg is not None:
            self._tg.start_soon(self.roots.refresh, connection)

    def _known_tool(self, name: str) -> bool:
        """A tool name telemetry may use as a metric label (else ``_OTHER``)."""
        return self.registry.get_entry(name) is not None or self.bridge.handles(name)

    # ------------------------------------------------------------------ sessions, upstreams
    async def wait_lists(self) -> None:
        """Lists wait for the initial upstream connects, never past the start-up deadline."""
        await self.startup.wait_lists()

    def track_session(self, connection: Any) -> None:
        """A handshake-era connection: it gets list_changed notifications from now on."""
        self.sessions.add(connection)

    @property
    def upstreams_ready(self) -> bool:
        """Whether every upstream finished its first connection attempt."""
        return self.upstreams.initial_done

    def upstream_statuses(self) -> list[UpstreamStatus]:
        """One status per configured upstream server, in file order."""
        return self.upstreams.statuses()

    def upstreams_for(self, caller: Caller) -> list[ServerConnection]:
        """The upstream connections ``caller`` may reach (what its capabilities are made of)."""
        return reachable_upstreams(self.access, self.upstreams, caller)

    async def open_connect_link(self, name: str, ticket: str, base: str,
                                signed_in: str | None) -> ConnectAnswer:
        """``GET /connect/NAME``: begin a per-user server's sign-in (mcp_hub/upstream/peruser/)."""
        return await self.per_user.open_link(name, ticket, base, signed_in)

    async def finish_connect(self, query: dict[str, str], browser: str | None) -> ConnectAnswer:
        """``GET /connect/callback``: the authorization server's redirect back."""
        return await self.per_user.finish(query, browser)

    # ------------------------------------------------------------------ list freshness, ops views
    @property
    def tools_generation(self) -> int:
        """The registry's generation: it moves on every change of the tools."""
        return int(self.registry.generation)

    def tools_availability(self) -> Hashable:
        """What changes when the visible tools may: the generation and the gated tools' state
        (a ``check_fn`` that flips after its TTL)."""
        key: Hashable = self.registry.definitions.availability_key()
        return key

    def list_hint(self, kind: str, caller: Caller, *, gated: bool | None = None) -> ListHintValue:
        """The ``ttlMs``/``cacheScope`` of the ``kind`` list for ``caller`` (mcp_hub.hub.list_freshness)."""
        return list_hint(self, kind, caller, gated=gated)

    def ops_view(self, caller: Caller) -> OpsView:
        """What ``/status.json``, the status page and ``/metrics`` show this caller."""
        return self.access.ops_view(caller)

    def metrics_text(self, caller: Caller) -> str:
        """The ``/metrics`` body for this caller: its servers' and tools' series, its own counters."""
        return self.metrics.render(upstreams=self.upstreams.statuses(), list_changed=self.sessions.sent,
                                   sessions=self.sessions.count, view=self.access.ops_view(caller))

    # ------------------------------------------------------------------ prompts, resources (upstream_serving)
    async def list_prompts(self, caller: Caller) -> list[types.Prompt]:
        return await self.upstream_serving.list_prompts(caller)

    async def get_prompt(self, caller: Caller, name: str, arguments: dict[str, str] | None,
                         call: CallContext | None) -> types.GetPromptResult:
        return await self.upstream_serving.get_prompt(caller, name, arguments, call)

    async def list_resources(self, caller: Caller) -> list[types.Resource]:
        return await self.upstream_serving.list_resources(caller)

    async def list_resource_templates(self, caller: Caller) -> list[types.ResourceTemplate]:
        return await self.upstream_serving.list_resource_templates(caller)

    async def read_resource(self, caller: Caller, uri: str, call: CallContext | None
                            ) -> types.ReadResourceResult:
        return await self.upstream_serving.read_resource(caller, uri, call)

    async def subscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        await self.upstream_serving.subscribe(caller, uri, connection)

    async def unsubscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        await self.upstream_serving.unsubscribe(caller, uri, connection)

    async def drop_subscriber(self, uri: str, connection: Any) -> None:
        await self.upstream_serving.drop_subscriber(uri, connection)

    async def complete(
        self, caller: Caller, ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument, context: types.CompletionContext | None,
    ) -> types.Completion:
        return await self.upstream_serving.complete(caller, ref, argument, context)

    async def set_log_level(self, connection: Any, level: types.LoggingLevel) -> None:
        await self.upstream_serving.set_log_level(connection, level)

    # ------------------------------------------------------------------ skills (skill_serving)
    async def list_skills(self, caller: Caller, call: CallContext | None) -> dict[str, Any]:
        return await self.skill_serving.list_skills(caller, call)

    async def get_skill(self, caller: Caller, uri: str, call: CallContext | None
                        ) -> dict[str, Any]:
        return await self.skill_serving.get_skill(caller, uri, call)

    async def read_directory(self, caller: Caller, uri: str, cursor: str | None,
                             call: CallContext | None) -> dict[str, Any]:
        return await self.skill_serving.read_directory(caller, uri, cursor, call)

    # ------------------------------------------------------------------ tasks (task_serving)
    @property
    def task_forwarder(self) -> TaskForwarder | None:
        """Carries ``tasks/*`` to the replica holding a task (set with a replica bus)."""
        return self.task_serving.forwarder

    @task_forwarder.setter
    def task_forwarder(self, forwarder: TaskForwarder | None) -> None:
        self.task_serving.forwarder = forwarder

    async def task_request(self, caller: Caller, owner: str, method: str,
                           params: dict[str, Any], call: CallContext | None,
                           listener: Any = None) -> dict[str, Any]:
        return await self.task_serving.request(caller, owner, method, params, call, listener)

    async def serve_task_for_replica(self, hub_id: str, digest: str, method: str,
                                     params: dict[str, Any]) -> dict[str, Any]:
        return await self.task_serving.serve_for_replica(hub_id, digest, method, params)

    async def list_tasks(self, caller: Caller, owner: str, call: CallContext | None
                         ) -> dict[str, Any]:
        return await self.task_serving.list_owned(caller, owner, call)

    # ------------------------------------------------------------------ reload
    async def reload(self, new: HubConfig | None = None) -> bool:
        """Apply a new config (re-read from the same file when ``new`` is None).

        Added servers connect, removed ones disconnect (their tools leave),
        changed ones restart, unchanged ones are not touched. An invalid file
        keeps the running config and logs the error with its key path; returns
        whether the new config was applied.
        """
        if new is None:
            try:
                new = await anyio.to_thread.run_sync(load_config, self.config.source)
            except ConfigError as exc:
                logger.error("config reload refused, keeping the running config: %s", exc)
                return False
        # Every check that can refuse the new config ran in load_config (reserved toolset
        # names included), so nothing below fails half-way through the state changes.
        old = self.config
        self.secrets.add(new.secret_values)
        self.runtime.config = new
        self.registry.allow_tool_override = new.hub.allow_tool_override
        for name in set(old.toolsets) - set(new.toolsets):
            self.toolsets.unregister_composite(name)
        for name, ts in new.toolsets.items():
            self.toolsets.register_composite(name, ts.tools, ts.includes, ts.description)
        self.config = new
        self.telemetry, retired = reconfigure_telemetry(  # [telemetry] applies at once
            self.telemetry, old.telemetry, new.telemetry, service_version=__version__,
            known_tool=self._known_tool)
        if retired is not None and self._tg is not None:
            self._tg.start_soon(stop_telemetry, retired)
        for bridge in self._bridges.values():
            bridge.settings = new.tool_search
        self._tools_cache.clear()
        self._defs_cache.clear()
        self._catalog_cache.clear()
        await self.upstreams.apply_config(hub_connected(new))
        self.per_user.apply_config(new)
        await self.roots.changed()  # the configured file roots may be what upstreams see
        self.registry.invalidate_check_fn_cache()
        self.sessions.changed("tools")
        logger.info("config reloaded from %s", new.source or "(memory)")
        return True

    async def watch_config(self, *, interval: float = 1.0) -> None:
        """Reload whenever the config file changes on disk (polled; no extra dependency)."""
        path = self.config.source
        if path is None:
            return
        apath = anyio.Path(path)

        async def stamp() -> tuple[float, int] | None:
            try:
                st = await apath.stat()
            except OSError:
                return None
            return (st.st_mtime, st.st_size)

        last = await stamp()
        while True:
            await anyio.sleep(interval)
            current = await stamp()
            if current is not None and current != last:
                last = current
                await self._reload_logged()

    async def reload_on_sighup(self) -> None:
        """Reload on SIGHUP (where the platform has it)."""
        import signal

        sighup = getattr(signal, "SIGHUP", None)
        if sighup is None:
            return
        with anyio.open_signal_receiver(sighup) as signals:
            async for _ in signals:
                logger.info("SIGHUP: reloading the config")
                await self._reload_logged()

    async def _reload_logged(self) -> None:
        """A reload that can never take the hub down: any failure is logged."""
        try:
            await self.reload()
        except Exception:
            logger.exception("config reload failed; the hub keeps serving")

    # ------------------------------------------------------------------ changes
    def _on_registry_change(self, generation: int) -> None:
        self._tools_cache.clear()
        self._defs_cache.clear()
        self.sessions.changed("tools")

    def _on_upstream_change(self, kind: ChangeKind) -> None:
        if kind != "tools":  # tools arrive through the registry listener
            self.sessions.changed(kind)

    def _on_upstream_announce(self, server: str, kind: ChangeKind) -> None:
        # An upstream's list_changed whose listing the hub found the same: passed on
        # as said (the upstream may know of a change the hub does not compare), for
        # tools to the callers that may use that server.
        if kind == "tools":
            self.sessions.announced_tools(server)
        else:
            self.sessions.changed(kind)

    async def _on_resource_updated(self, uri: str) -> None:
        await self.upstream_serving.resource_updated(uri)

    async def _on_upstream_log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        # An upstream log outside any call: hand it to every live handshake session
        # that set a logging level admitting it.
        for conn in self.sessions.connections():
            threshold = client_log_level(conn.state)
            if threshold is None or below_level(params.level, threshold):
                continue
            try:
                await conn.notify(
                    "notifications/message",
                    params.model_dump(by_alias=True, mode="json", exclude_none=True),
                )
            except Exception:
                logger.debug("log relay to a closed session dropped", exc_info=True)

    # ------------------------------------------------------------------ tools
    def _definitions(self, caller: Caller) -> list[dict[str, Any]]:
        tools = self.access.policy(caller).tools
        names = None if tools is None else set(tools)
        defs = self.registry.get_definitions(names, cache_key=(caller, self.config.fingerprint()))
        rewrites = self.rewrites_for(caller)
        return defs if rewrites is None else rewrites.definitions(defs)

    def rewrites_for(self, caller: Caller) -> ProfileRewrites | None:
        """The tool rewrites (``[profiles.P.tools]``) of the caller's profiles, if any: the
        endpoint's and its identity's ``[[access]]`` rule's (:meth:`AccessControl.profiles`)."""
        if caller.profile is None and caller.identity is None:
            return None
        profiles = self.access.profiles(caller)
        if not profiles:
            return None
        config = self.config
        cached = self._rewrites.get(profiles)
        if cached is not None and cached[0] is config:
            return cached[1]
        layers = [s.tools for p in profiles if (s := config.profiles.get(p)) is not None and s.tools]
        rewrites = ProfileRewrites(stacked(layers), config.secret_values) if layers else None
        if len(self._rewrites) >= 64:
            self._rewrites.clear()
        self._rewrites[profiles] = (config, rewrites)
        return rewrites

    def _deferred_catalog(self, caller: Caller) -> Catalog:
        """What ``tool_search`` searches for ``caller``: the upstream and plugin tools it may reach.

        Cached per caller and availability (generation and check_fn results), so a bridge
        call costs no registry scan.
        """
        available = self.registry.definitions.availability_key()
        cached = self._catalog_cache.get(caller)
        if cached is not None and cached[0] == available:
            return cached[1]
        defs = self._definitions(caller)
        origins, servers = self.listing.origins()
        if (rewrites := self.rewrites_for(caller)) is not None:
            origins, servers = rewrites.names(origins), rewrites.names(servers)
        result = ([d for d in defs if origins.get(d["name"]) in ("upstream", "plugin")], servers,
                  available)
        if len(self._catalog_cache) >= 64:
            self._catalog_cache.clear()
        self._catalog_cache[caller] = (available, result)
        return result

    def bridge_for(self, who: Caller | str | None) -> ToolSearchBridge:
        """The tool_search bridge of one caller: its catalog holds only what the caller reaches."""
        caller = as_caller(who)
        bridge = self._bridges.get(caller)
        if bridge is None:
            bridge = ToolSearchBridge(self.config.tool_search,
                                      lambda: self._deferred_catalog(caller))
            self._bridges[caller] = bridge
            while len(self._bridges) > 64:
                self._bridges.popitem(last=False)
        return bridge

    def list_tools(self, profile: Caller | str | None = None) -> list[types.Tool]:
        """The tools/list answer for a caller or profile (None = everything), cached per generation."""
        caller = as_caller(profile)
        # Keyed on what the registry's definition cache says is available now, not the
        # bare generation: a check_fn that flips after its TTL changes the key.
        key = (caller, self.registry.definitions.availability_key())
        cached = self._tools_cache.get(key)
        if cached is not None:
            return cached
        tools = [self._tool_models.model(d) for d in self.tool_definitions(caller)]
        self._keep_tools(key, tools)
        return tools

    def _keep_tools(self, key: tuple[Any, ...], tools: list[types.Tool]) -> None:
        """A caller's ``tools/list`` models, kept for 16 (caller, registry state) keys."""
        self._tools_cache[key] = tools
        while len(self._tools_cache) > 16:
            self._tools_cache.popitem(last=False)

    async def list_tools_sliced(self, profile: Caller | str | None,
                                pause: Callable[[], Awaitable[None]]) -> list[types.Tool]:
        """:meth:`list_tools`, awaiting ``pause()`` between steps (its cache is shared): after
        a change of a large catalog, building the list in one piece holds the loop for
        milliseconds."""
        caller = as_caller(profile)
        key = (caller, self.registry.definitions.availability_key())
        cached = self._tools_cache.get(key)
        if cached is not None:
            return cached
        config = self.config
        tools = []
        for i, definition in enumerate(await self.tool_definitions_sliced(caller, pause)):
            tools.append(self._tool_models.model(definition))
            if i % 64 == 63:
                await pause()
        # Kept only if neither the registry nor the config changed meanwhile.
        if self.registry.definitions.availability_key() == key[1] and self.config is config:
            self._keep_tools(key, tools)
        return tools

    def tool_definitions(self, profile: Caller | str | None = None) -> list[dict[str, Any]]:
        """The definitions ``tools/list`` shows this caller (the ``tool_search`` plan applied)."""
        return run_steps(self.listing.definition_steps(as_caller(profile)))

    async def tool_definitions_sliced(self, profile: Caller | str | None,
                                      pause: Callable[[], Awaitable[None]]) -> list[dict[str, Any]]:
        """:meth:`tool_definitions`, awaiting ``pause()`` between steps of a few dozen tools.

        Worked out once per (caller, registry state, config): after a change, the
        list_changed digest and the prepared ``tools/list`` both need it, at the same
        moment; the second waits for the first instead of doing it again. The
        definitions are shared: callers read them, never change them.
        """
        caller = as_caller(profile)
        while True:
            key = (caller, self.registry.definitions.availability_key(), id(self.config))
            cached = self._defs_cache.get(key)
            if cached is not None:
                return list(cached)
            if not await self._defs_flights.joined(key):
                break
        with self._defs_flights.flying(key):
            defs = await run_steps_sliced(self.listing.definition_steps(caller), pause)
            if (caller, self.registry.definitions.availability_key(), id(self.config)) == key:
                self._defs_cache[key] = defs
                while len(self._defs_cache) > 16:
                    self._defs_cache.popitem(last=False)
            return list(defs)

    def tool_search_state(self, profile: Caller | str | None = None) -> dict[str, Any]:
        caller = as_caller(profile)
        defs = self._definitions(caller)
        origins, servers = self.listing.origins()
        if (rewrites := self.rewrites_for(caller)) is not None:
            origins, servers = rewrites.names(origins), rewrites.names(servers)
        plan = plan_exposure(defs, origins, servers, self.config.tool_search)
        return {
            "mode": self.config.tool_search.mode,
            "active": plan.active,
            "deferrable_tokens": plan.deferrable_tokens,
            "threshold_tokens": plan.threshold_tokens,
            "deferred_tools": len(plan.deferred),
            "ranking": ranking_status(self.config.tool_search),
        }

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, call: CallContext | None = None,
        *, profile: Caller | str | None = None,
    ) -> types.CallToolResult:
        """Run one tool call through the whole pipeline for a caller (or profile); record metrics.

        A name the caller may not reach fails exactly like a name that does not exist,
        directly and through the bridge's ``tool_call``. While the hub drains
        (mcp_hub.hub.drain) a new call is refused, and a call still running at the end of
        the drain period ends with an error result.
        """
        if self.drain.draining:
            return self.drain.refused(name)
        with self.drain.call():
            return await self._call_tool(name, arguments, call, caller=as_caller(profile))
        return self.drain.cancelled(name)

    async def call_tool_task(
        self, name: str, arguments: dict[str, Any] | None, task: dict[str, Any] | None,
        call: CallContext, *, profile: Caller | str | None, owner: str, listener: Any = None,
    ) -> dict[str, Any] | types.CallToolResult:
        """A ``tools/call`` that may become a task, through the whole pipeline.

        2025-11-25: ``task`` goes to the upstream with the call. 2026-07-28 extension
        (``task`` None): the upstream decides, and answers a flat ``CreateTaskResult``.
        When the upstream answers with a task, the hub records it for ``owner``
        (mcp_hub.hub.tasks) and answers with the hub's own task id; a tool that ran at once
        (a builtin, an upstream that ignores ``task``) gives its result as usual.
        """
        call.task = task
        call.task_extension = task is None
        result = await self.call_tool(name, arguments, call, profile=profile)
        if call.created_task is None:
            return result
        server, answer = call.created_task
        return await self.task_serving.created(server, answer, owner, listener)

    def _app_tool(self, name: str, call: CallContext, caller: Caller) -> str:
        """The exposed name of an app's call by its server's own tool ``name``
        (mcp_hub.protocol.apps); ``name`` itself when the hub has such a tool or no app does."""
        if self.registry.get_entry(name) is not None or self.bridge_for(caller).handles(name):
            return name
        candidates = self.upstreams.app_tools(name)
        allowed = self.access.tool_filter(caller)
        if allowed is not None:
            candidates = {s: exposed for s, exposed in candidates.items() if allowed(exposed)}
        if not candidates:
            return name
        chosen = self.rendered_apps.choose(app_session_key(call), candidates)
        if chosen is None:  # several apps have it and this session read none of them
            raise UnknownToolError(name, sorted(candidates.values()))
        return chosen

    async def _call_tool(
        self, name: str, arguments: dict[str, Any] | None, call: CallContext | None,
        *, caller: Caller,
    ) -> types.CallToolResult:
        # Right after start, a call waits only for the servers that could provide the
        # name, and never past the start-up deadline (mcp_hub.hub.startup).
        await self.startup.before_call(name, arguments, self.bridge.handles(name))
        call = call if call is not None else CallContext(tool_name=name, hub=self)
        if call.hub is None:
            call.hub = self
        call.identity = call.identity or caller.identity
        call.caller = caller
        started = time.perf_counter()
        status = "error"
        result: types.CallToolResult | None = None
        rewrites = self.rewrites_for(caller)
        if rewrites is None:
            name = self._app_tool(name, call, caller)
        entry = self.registry.get_entry(name if rewrites is None else rewrites.upstream_name(name))
        upstream = self._upstream_name(entry)
        try:
            with self.telemetry.serve(name, call) as traced:
                result = await handle_function_call(
                    name, arguments or {}, registry=self.registry, hooks=self.hooks,
                    bridge=self.bridge_for(caller),
                    max_result_size_chars=self.config.hub.max_result_size_chars,
                    allow=self.access.tool_filter(caller), call=call,
                    rewrite=None if rewrites is None else rewrites.translator(call.claims),
                )
                traced.done(result)
                if entry is not None:
                    traced.tool(upstream)
            status = "error" if result.is_error else "ok"
            return result
        except UnknownToolError as exc:
            status = "unknown"
            unlisted = None if rewrites is not None else await self._unlisted_call(
                name, arguments or {}, call, caller, exc.suggestions)
            if unlisted is not None:
                result = unlisted
                status = "error" if unlisted.is_error else "ok"
                return unlisted
            waiting = login_wanted(name, self.config.servers, self.upstreams.statuses())
            allowed = self.access.tool_filter(caller)
            if waiting is None or (allowed is not None and not allowed(name)):
                if rewrites is not None:  # "did you mean" only from what the profile shows
                    asked = rewrites.profile_name(exc.name)
                    shown = [d["name"] for d in self._definitions(caller)]
                    raise UnknownToolError(asked, difflib.get_close_matches(asked, shown, n=3)
                                           ) from None
                raise
            return types.CallToolResult(content=[types.TextContent(text=waiting)], is_error=True)
        finally:
            server = _server_of_toolset(entry.toolset) if entry else "hub"
            seconds = time.perf_counter() - started
            # Only a registered name becomes a label: made-up names share one series.
            label = name if entry is not None or self.bridge.handles(name) else UNKNOWN_TOOL
            self.metrics.observe_call(label, server, status, seconds, time.time(),
                                      identity=caller.identity, upstream_tool=upstream,
                                      listed=entry.name if entry is not None else None)
            if self.audit.enabled:
                self.audit.call(**audit_fields(caller, call, name, server, status, entry is not None,
                                               seconds, arguments, result),
                                upstream_tool=upstream)

    async def _unlisted_call(self, name: str, arguments: dict[str, Any], call: CallContext,
                             caller: Caller, suggestions: list[str]
                             ) -> types.CallToolResult | None:
        """A call of a tool nobody lists, passed to the server that would own the name
        (docs/upstreams.md, "Unlisted tools"); None when no server does, or the caller's
        access rules do not reach that name on that server. ``suggestions`` (the caller's
        close names) are added to the server's own "unknown tool" answer."""
        conn = self.upstreams.unlisted_owner(name)
        if conn is None:
            return None
        policy = self.access.policy(caller)
        if not policy.tool(name) or not policy.server(conn.name):
            return None

        async def run(args: dict[str, Any]) -> types.CallToolResult:
            return await conn.call_tool(name, args, call, pass_errors=True)

        return await handle_unlisted_call(
            name, arguments, run, registry=self.registry, hooks=self.hooks,
            max_result_size_chars=self.config.hub.max_result_size_chars,
            suggestions=suggestions, call=call)

    def _upstream_name(self, entry: Any) -> str | None:
        """The upstream's own name of an upstream tool (it differs when a rewrite renamed it)."""
        if entry is None or entry.origin != "upstream":
            return None
        server = server_of_toolset(entry.toolset)
        conn = self.upstreams.connection(server) if server else None
        return conn.exposed.get(entry.name) if conn is not None else None

    # ------------------------------------------------------------------ status
    def status(self, profile: Caller | str | None = None) -> dict[str, Any]:
        """Everything ``hub_status`` and the status page show this caller, secrets redacted.

        The caller's :class:`~mcp_hub.hub.access.OpsView` decides: the servers, tools,
        rejected tools and recent calls it reaches, the counters of its own identity,
        and the hub-wide sections only when it reaches everything. Without a
        caller (the operator, no sign-in): all of it.
        """
        view = self.access.ops_view(profile)
        statuses = [st for st in self.upstreams.statuses() if view.shows_server(st.name)]
        toolsets: dict[str, int] = {}
        for e in self.registry.snapshot().values():
            if view.shows_tool(e.name):
                toolsets[e.toolset] = toolsets.get(e.toolset, 0) + 1
        body: dict[str, Any] = {
            "hub": self._hub_status(view.hub_wide),
            "upstreams": [_upstream_status(st, view) for st in statuses],
            "tools": {"total": sum(toolsets.values()), "by_toolset": dict(sorted(toolsets.items()))},
            "rejected_tools": _rejected_shown(rejected_tools(self.registry.rejections, statuses), view),
            "tool_search": self.tool_search_state(profile),
            "recent_calls": [
                {"tool": c.tool, "upstream_tool": c.upstream_tool, "server": c.server,
                 "status": c.status, "duration_ms": round(c.duration_ms, 2), "time": c.time}
                for c in list(self.metrics.recent) if view.shows_tool(c.listed or c.tool)
            ][-20:],
            "identities": self.metrics.identity_summary(view.shows_identity),
        }
        if not view.full:
            body["view"] = {"scope": "caller", "identity": view.identity}
        if view.hub_wide:
            body.update(self._hub_wide_status())
        return body

    def _hub_status(self, hub_wide: bool) -> dict[str, Any]:
        hub: dict[str, Any] = {"name": self.config.hub.name, "version": self.version,
                               "uptime_seconds": round(time.time() - self.started_at, 1),
                               "sessions": self.sessions.count}
        if hub_wide:
            hub.update({"config": str(self.config.source) if self.config.source else None,
                        "plugins": self.plugins})
        return hub

    def _hub_wide_status(self) -> dict[str, Any]:
        """Sections about the whole hub: rounds, pins, the shared state, per-user servers, OAuth."""
        extra: dict[str, Any] = {"input_rounds": self.rounds.report()}
        pin_report = getattr(self.upstreams, "pin_report", None)
        if callable(pin_report):
            extra["pins"] = pin_report()
        extra["state"] = self.state.status()
        extra["per_user"] = self.per_user.status()
        if oauth := oauth_status(self.config.servers):
            extra["oauth"] = oauth  # which token store, where; never a token
        return extra
