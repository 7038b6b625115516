"""UpstreamManager: every upstream server of ``servers.toml``, supervised and merged.

The manager owns one task group with one :class:`ServerConnection` task per
enabled server. Tools go straight into the registry (toolset ``mcp-<server>``);
prompts, resources and resource templates are merged here:

- prompts are namespaced like tools (``prefix + separator + name``); on a
  collision the server later in ``servers.toml`` wins, as for tools;
- resources keep their URIs; a URI offered by two servers belongs to the first
  in file order and the other server reports it in ``shadowed_resources``;
- except app resources (MCP Apps): a ``ui://REST`` address of server ``S`` is
  listed, read and watched as ``ui://S/REST`` (:mod:`mcp_hub.protocol.apps`), so two
  servers' apps never collide; the server's tool definitions name it the same
  way (``_meta.ui.resourceUri``, rewritten in :mod:`mcp_hub.upstream.catalog`);
- and skill files (Agent Skills, :mod:`mcp_hub.protocol.skills`): a ``skill://REST``
  address or template of server ``S`` is ``skill://S/REST`` the same way;
- resource templates are listed as they are; a read of a URI no server listed is
  routed to the first server with a matching template (RFC 6570 match), else to
  the only server that offers resources at all;
- completions and subscriptions go to the server that owns the prompt or URI.

Tools follow the same "later in file order wins" rule for ``prefix = ""``
collisions whatever the order the servers connect in, and a tool shadowed that
way comes back when the server that held its name goes away.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from types import TracebackType
from typing import Any, Literal, Self

import anyio
import anyio.abc
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from mcp_hub import __version__
from mcp_hub.config.model import HubConfig, ServerConfig
from mcp_hub.errors import resource_not_found
from mcp_hub.pins.pinning import PinError, PinStore
from mcp_hub.pins.stores import open_pin_store
from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.apps import UI_SCHEME
from mcp_hub.protocol.skills import SKILL_SCHEME, namespaced_uri, split_namespaced
from mcp_hub.redact import add_secrets
from mcp_hub.registry.naming import exposed_prompt_name, server_of_toolset
from mcp_hub.upstream.connection import ConnectionHooks, Kind, ServerConnection
from mcp_hub.upstream.sessions.listening import confirm_watched, listens
from mcp_hub.upstream.start_report import EVERY_SECONDS, report_first_start
from mcp_hub.upstream.status import UpstreamStatus
from mcp_hub.upstream.stdio.prespawn import AdoptEarly

__all__ = ["UpstreamManager"]

logger = logging.getLogger("mcp_hub.upstream")

OnChange = Callable[[Literal["tools", "prompts", "resources"]], None]
OnResourceUpdated = Callable[[str], Awaitable[None]]
OnLog = Callable[[str, types.LoggingMessageNotificationParams], Awaitable[None]]

#: How often a running hub re-reads the pin file (``mcp-hub pins accept`` from a shell).
PINS_RELOAD_SECONDS = 2.0


class _Catalog:
    """The merged prompts / resources / templates, rebuilt when a server's change."""

    def __init__(self) -> None:
        self.prompts: list[types.Prompt] = []
        self.prompt_map: dict[str, tuple[ServerConnection, str]] = {}
        self.resources: list[types.Resource] = []
        self.resource_map: dict[str, ServerConnection] = {}
        self.shadowed: dict[str, list[str]] = {}
        self.templates: list[types.ResourceTemplate] = []
        self.template_map: dict[str, ServerConnection] = {}
        self.template_matchers: list[tuple[UriTemplate, ServerConnection]] = []


class UpstreamManager:
    """Connects to every enabled upstream and keeps its tools, prompts and resources current.

    Use as an async context manager: ``__aenter__`` starts one supervised task
    per enabled server and returns at once; ``__aexit__`` stops them all (every
    stdio child is terminated with its process group).
    """

    def __init__(
        self,
        config: HubConfig,
        registry: Any,
        *,
        on_change: OnChange | None = None,
        on_announced: Callable[[str, Kind], None] | None = None,
        on_resource_updated: OnResourceUpdated | None = None,
        on_log: OnLog | None = None,
        remember_secrets: Callable[[Iterable[str]], None] = add_secrets,
        adopt_early: AdoptEarly | None = None,
        progress_every: float = EVERY_SECONDS,
    ) -> None:
        self.config = config
        self.registry = registry
        self.on_change = on_change
        #: An upstream said a list changed that the hub found the same (the Hub tells its
        #: clients all the same; ``on_change`` covers the lists that did change).
        self.on_announced = on_announced
        self.on_resource_updated = on_resource_updated
        self.on_log = on_log
        self._log_level: types.LoggingLevel | None = None
        #: What an upstream's roots/list outside any call is answered with (set by the Hub).
        self.roots_provider: Callable[[], types.ListRootsResult] | None = None
        #: ``on_task_status(server, params)``: an upstream task's status changed (set by the Hub).
        self.on_task_status: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None
        #: Where this manager's secret values go (a Hub passes its own set's ``add``).
        self.remember_secrets = remember_secrets
        #: The Hub's early-started processes, offered to each stdio connection.
        self.adopt_early = adopt_early
        #: How often the first start names the servers it still waits for (start_report).
        self.progress_every = progress_every
        self._connections: dict[str, ServerConnection] = {}
        self._order: dict[str, int] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._ready_event = anyio.Event()
        self._catalog: _Catalog | None = None
        self._pulse_event = anyio.Event()
        self._pins_error: str | None = None
        self.pins: PinStore | None = self._open_pins(config)
        self._build_connections(config)

    # ── lifecycle ─────────────────────────────────────────────────────────────

    def _hooks(self) -> ConnectionHooks:
        return ConnectionHooks(
            changed=self._changed,
            announced=self._announced,
            resource_updated=self._resource_updated,
            log=self._log,
            logging_level=lambda: self._log_level,
            yields_to=self._yields_to,
            pulse=self._pulse,
            client_name=self.config.hub.name,
            client_version=__version__,
            pins=self.pins,
            roots=self._roots_answer,
            adopt_early=self.adopt_early,
            task_status=self._task_status,
        )

    def _roots_answer(self) -> types.ListRootsResult:
        provider = self.roots_provider
        return provider() if provider is not None else types.ListRootsResult(roots=[])

    async def roots_changed(self) -> None:
        """Tell every connected upstream that the roots changed (bounded, never raises)."""
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as tg:
                for conn in list(self._connections.values()):
                    tg.start_soon(conn.notify_roots_changed)

    def _open_pins(self, config: HubConfig) -> PinStore | None:
        """The pin store of ``config``; None (logged) when its file cannot be read."""
        try:
            store = open_pin_store(config)
        except PinError as exc:
            logger.error("tool pinning is off until the pin file is fixed: %s", exc)
            return None
        except OSError as exc:
            logger.error("tool pinning is off: cannot use %s: %s", config.state_path(),
                         exc.strerror or exc)
            return None
        return store

    def pin_report(self) -> dict[str, Any] | None:
        """For ``hub_status``: pinned, changed, blocked and flagged tools (None: pinning off)."""
        return self.pins.report() if self.pins is not None else None

    async def _watch_pins(self) -> None:
        """Re-read the pin file now and then; refresh the tools of the servers whose
        records another process changed (``mcp-hub pins accept`` takes effect live)."""
        while True:
            await anyio.sleep(PINS_RELOAD_SECONDS)
            pins = self.pins
            if pins is None:
                continue
            try:
                changed = await anyio.to_thread.run_sync(pins.reload)
            except PinError as exc:
                if str(exc) != self._pins_error:
                    self._pins_error = str(exc)
                    logger.error("pins: %s", exc)
                continue
            self._pins_error = None
            for name in sorted(changed):
                conn = self._connections.get(name)
                if conn is not None and conn.session is not None:
                    logger.info("upstream %s: pins changed on disk; listing tools again", name,
                                extra={"server": name})
                    conn.request_refresh("tools")

    def _build_connections(self, config: HubConfig) -> None:
        self.remember_secrets(_secret_values(config))
        self._order = {name: i for i, name in enumerate(config.servers)}
        for name, server in config.servers.items():
            self._connections[name] = ServerConnection(
                name, server, config.hub, self.registry, self._hooks())

    async def __aenter__(self) -> Self:
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        enabled = [c for c in self._connections.values() if c.config.enabled]
        tg.start_soon(report_first_start, enabled, self.progress_every, name="upstream:report")
        for conn in enabled:
            tg.start_soon(conn.run, name=f"upstream:{conn.name}")
        tg.start_soon(self._watch_initial, name="upstream:initial")
        tg.start_soon(self._watch_pins, name="upstream:pins")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        assert tg is not None, "UpstreamManager was not entered"
        self._tg = None
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    async def _watch_initial(self) -> None:
        for conn in list(self._connections.values()):
            if conn.config.enabled:
                await conn.first_done.wait()
        self._ready_event.set()

    @property
    def ready_event(self) -> anyio.Event:
        """Set once every enabled server has finished its first connection attempt."""
        return self._ready_event

    @property
    def initial_done(self) -> bool:
        return self._ready_event.is_set()

    def _pulse(self) -> None:
        event = self._pulse_event
        self._pulse_event = anyio.Event()
        event.set()

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, re-checking after every upstream state or
        catalog change (bound it with ``anyio.fail_after``)."""
        while not predicate():
            await self._pulse_event.wait()

    async def wait_ready(self, timeout: float) -> None:  # noqa: ASYNC109 - public contract
        """Wait until every enabled server finished its first attempt, or ``timeout`` passed."""
        with anyio.move_on_after(timeout):
            await self._ready_event.wait()

    # ── hot reload ────────────────────────────────────────────────────────────

    async def apply_config(self, new: HubConfig) -> None:
        """Adopt ``new``: start added servers, stop removed ones, restart changed ones.

        A server whose settings (and the hub's naming settings) are unchanged keeps
        its connection untouched.
        """
        old = self.config
        self.remember_secrets(_secret_values(new))
        naming_changed = (
            old.hub.tool_name_separator != new.hub.tool_name_separator
            or old.hub.max_tool_name_length != new.hub.max_tool_name_length
            or old.hub.dedupe_prefix != new.hub.dedupe_prefix
        )
        self.config = new
        repin = self._apply_pins_config(old, new)
        stop: list[ServerConnection] = []
        start: list[str] = []
        for name, conn in list(self._connections.items()):
            server = new.servers.get(name)
            if server is None or naming_changed or _differs(conn.config, server):
                stop.append(conn)
                del self._connections[name]
                if server is not None:
                    start.append(name)
            else:
                rewrites_changed = conn.config.tools != server.tools
                conn.config = server
                conn.settings = new.hub
                conn.hooks.pins = self.pins
                if name in repin or rewrites_changed:
                    conn.request_refresh("tools")
                conn.wake()  # a parked server is probed again on reload
        for name in new.servers:
            if name not in self._connections and name not in start:
                start.append(name)
        watched = {conn.name: set(conn.watched.uris) for conn in stop}
        for conn in stop:
            conn.stop()
        if self._tg is not None:
            for conn in stop:
                if conn.config.enabled:
                    await conn.stopped.wait()
        self._order = {name: i for i, name in enumerate(new.servers)}
        conns = {}
        for name in new.servers:
            if name in start:
                conns[name] = ServerConnection(name, new.servers[name], new.hub, self.registry,
                                               self._hooks())
                # A restarted server keeps its clients' resource subscriptions.
                conns[name].watched.uris.update(watched.get(name, ()))
            else:
                conns[name] = self._connections[name]
        self._connections = conns
        if self._tg is not None:
            for name in start:
                conn = self._connections[name]
                if conn.config.enabled:
                    self._tg.start_soon(conn.run, name=f"upstream:{name}")
        self._catalog = None
        if stop or start:
            for kind in ("tools", "prompts", "resources"):
                self._emit(kind)

    def _apply_pins_config(self, old: HubConfig, new: HubConfig) -> set[str]:
        """Adopt the pin settings of ``new``; the servers whose pin policy changed."""
        pins = self.pins
        if pins is None or old.state_path() != new.state_path():
            self.pins = self._open_pins(new)
            return set(new.servers)
        before = {name: pins.policy_for(name) for name in new.servers}
        pins.policy = new.pins.policy
        pins.server_policies = {n: s.pin_policy for n, s in new.servers.items()
                                if s.pin_policy is not None}
        return {name for name, policy in before.items() if pins.policy_for(name) != policy}

    # ── status ────────────────────────────────────────────────────────────────

    def connections(self) -> list[ServerConnection]:
        """Every configured server's connection, in file order."""
        return list(self._connections.values())

    def connection(self, name: str) -> ServerConnection | None:
        """The connection object of server ``name`` (for tests and diagnostics)."""
        return self._connections.get(name)

    def statuses(self) -> list[UpstreamStatus]:
        """One status per configured server, in file order."""
        catalog = self._get_catalog()
        out = []
        for conn in self._connections.values():
            status = conn.status()
            status.shadowed_resources = list(catalog.shadowed.get(conn.name, ()))
            out.append(status)
        return out

    def server_of_tool(self, exposed_name: str) -> str | None:
        """The server whose tool is exposed as ``exposed_name`` (None for other tools)."""
        entry = self.registry.get_entry(exposed_name)
        name = server_of_toolset(entry.toolset) if entry is not None else None
        return name if name is not None and name in self._connections else None

    def unlisted_owner(self, name: str) -> ServerConnection | None:
        """The server a call of ``name``, a tool nobody lists, is passed to: the one server
        exposed without a prefix, when it takes the name (``takes_unlisted``); else None."""
        bare = [c for c in self._connections.values() if c.prefix == ""]
        if len(bare) != 1 or not bare[0].takes_unlisted(name):
            return None
        return bare[0]

    # ── change propagation ────────────────────────────────────────────────────

    def _yields_to(self, server: str, toolset: str) -> bool:
        """Whether ``server`` must leave a tool name to the holder ``toolset`` (file order)."""
        holder = server_of_toolset(toolset)
        if holder is None or holder not in self._order:
            return False
        return self._order[holder] > self._order.get(server, -1)

    def _changed(self, server: str, kind: Kind) -> None:
        if kind == "tools":
            for conn in self._connections.values():
                if conn.name != server:
                    conn.reassert_tools()
        else:
            self._catalog = None
        self._emit(kind)
        self._pulse()

    def _announced(self, server: str, kind: Kind) -> None:
        if self.on_announced is not None:
            try:
                self.on_announced(server, kind)
            except Exception:
                logger.exception("on_announced callback failed")

    def _emit(self, kind: Kind) -> None:
        if self.on_change is not None:
            try:
                self.on_change(kind)
            except Exception:
                logger.exception("on_change callback failed")

    async def _resource_updated(self, uri: str) -> None:
        if self.on_resource_updated is not None:
            await self.on_resource_updated(uri)

    async def _task_status(self, server: str, params: dict[str, Any]) -> None:
        if self.on_task_status is not None:
            await self.on_task_status(server, params)

    async def _log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        if self.on_log is not None:
            await self.on_log(server, params)
        else:
            logger.info("[%s] upstream log %s: %s", server, params.level, params.data,
                        extra={"server": server})

    # ── merged catalog ────────────────────────────────────────────────────────

    def _get_catalog(self) -> _Catalog:
        catalog = self._catalog
        if catalog is None:
            catalog = self._catalog = self._build_catalog()
        return catalog

    def _build_catalog(self) -> _Catalog:
        c = _Catalog()
        hub = self.config.hub
        prompt_entries: dict[str, types.Prompt] = {}
        # A server's lists are emptied the moment it goes down, so whatever is listed
        # belongs to a server that is ready (or finishing its first listing).
        for conn in self._connections.values():
            siblings = {p.name for p in conn.prompts}
            for prompt in conn.prompts:
                exposed = exposed_prompt_name(conn.prefix, prompt.name, hub.tool_name_separator,
                                              hub.max_tool_name_length,
                                              dedupe=hub.dedupe_prefix, siblings=siblings)
                # Later in file order wins, as for tools.
                c.prompt_map[exposed] = (conn, prompt.name)
                prompt_entries[exposed] = prompt.model_copy(update={"name": exposed})
            for resource in conn.resources:
                uri = namespaced_uri(conn.name, str(resource.uri))
                if uri in c.resource_map:
                    c.shadowed.setdefault(conn.name, []).append(uri)
                    continue
                c.resource_map[uri] = conn
                c.resources.append(resource if uri == str(resource.uri)
                                   else resource.model_copy(update={"uri": uri}))
            for template in conn.templates:
                if template.uri_template.startswith(SKILL_SCHEME):
                    template = template.model_copy(update={
                        "uri_template": namespaced_uri(conn.name, template.uri_template)})
                if template.uri_template in c.template_map:
                    continue
                c.template_map[template.uri_template] = conn
                c.templates.append(template)
                try:
                    c.template_matchers.append((UriTemplate.parse(template.uri_template), conn))
                except InvalidUriTemplate:
                    logger.warning("upstream %s: unparseable resource template %r", conn.name,
                                   template.uri_template, extra={"server": conn.name})
        c.prompts = list(prompt_entries.values())
        return c

    def list_prompts(self) -> list[types.Prompt]:
        """Every upstream prompt under its exposed (namespaced) name."""
        return list(self._get_catalog().prompts)

    def list_resources(self) -> list[types.Resource]:
        """Every upstream resource, URIs unchanged; a duplicate URI lists the first server's."""
        return list(self._get_catalog().resources)

    def list_resource_templates(self) -> list[types.ResourceTemplate]:
        return list(self._get_catalog().templates)

    def _resource_owner(self, uri: str) -> ServerConnection:
        catalog = self._get_catalog()
        conn = catalog.resource_map.get(uri)
        if conn is not None:
            return conn
        app = split_namespaced(uri)
        if app is not None:  # an app or skill address names its server; else it is nobody's
            owner = self._connections.get(app[0])
            if owner is not None and owner.session is not None and owner.supports("resources"):
                return owner
            raise resource_not_found(uri)
        for template, owner in catalog.template_matchers:
            try:
                if template.match(uri) is not None:
                    return owner
            except ValueError:
                continue
        candidates = [c for c in self._connections.values()
                      if c.session is not None and c.supports("resources")]
        if len(candidates) == 1:
            return candidates[0]
        raise resource_not_found(uri)

    def app_tools(self, raw: str) -> dict[str, str]:
        """Server → exposed name of tool ``raw`` (the server's own name), for every ready
        server that serves an app (a ``ui://`` resource) and has such a tool."""
        found: dict[str, str] = {}
        for conn in self._connections.values():
            record = conn.tools.get(raw)
            if record is not None and conn.session is not None and any(
                    str(r.uri).startswith(UI_SCHEME) for r in conn.resources):
                found[conn.name] = record.exposed
        return found

    def prompt_server(self, name: str) -> str | None:
        """The server that serves exposed prompt ``name`` (None: no such prompt)."""
        target = self._get_catalog().prompt_map.get(name)
        return target[0].name if target is not None else None

    def resource_server(self, uri: str) -> str | None:
        """The server a ``resources/read`` of ``uri`` would go to (None: none)."""
        try:
            return self._resource_owner(uri).name
        except MCPError:
            return None

    def own_uri(self, conn: ServerConnection, uri: str) -> str:
        """The address server ``conn`` itself uses for the hub's ``uri``."""
        return _upstream_uri(conn, uri)

    def template_server(self, uri_template: str) -> str | None:
        """The server that listed resource template ``uri_template`` (None: none)."""
        owner = self._get_catalog().template_map.get(uri_template)
        return owner.name if owner is not None else None

    # ── routed requests ───────────────────────────────────────────────────────

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None, call: CallContext | None = None
    ) -> types.GetPromptResult:
        """``prompts/get`` of an exposed prompt name, forwarded to its server."""
        target = self._get_catalog().prompt_map.get(name)
        if target is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}")
        conn, raw = target
        return await conn.request(
            types.GetPromptRequest(params=types.GetPromptRequestParams(name=raw,
                                                                        arguments=arguments)),
            types.GetPromptResult, call, what=f"prompts/get {raw!r}")

    async def read_resource(self, uri: str, call: CallContext | None = None
                            ) -> types.ReadResourceResult:
        """``resources/read``, routed by URI."""
        conn = self._resource_owner(uri)
        own = _upstream_uri(conn, uri)
        result = await conn.request(
            types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=own)),
            types.ReadResourceResult, call, what=f"resources/read {own!r}")
        if own == uri:
            return result
        contents = [c.model_copy(update={"uri": namespaced_uri(conn.name, str(c.uri))})
                    for c in result.contents]
        return result.model_copy(update={"contents": contents})

    async def subscribe_resource(self, uri: str) -> None:
        """Subscribe at the owning server; kept across its reconnects.

        A 2026-07-28 upstream has no ``resources/subscribe``: the URI joins the
        filter of its listen stream, and the call returns once the upstream has
        acknowledged a stream that watches it.
        """
        conn = self._resource_owner(uri)
        uri = _upstream_uri(conn, uri)
        version = conn.watched.add(uri)
        if not self._can_subscribe(conn):
            return
        if listens(conn.session):
            await confirm_watched(conn.watched, uri, version,
                                  wait_seconds=conn.config.connect_timeout, server=conn.name)
            return
        await conn.request(
            types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
            types.EmptyResult, what=f"resources/subscribe {uri!r}")

    async def unsubscribe_resource(self, uri: str) -> None:
        conn = self._resource_owner(uri)
        uri = _upstream_uri(conn, uri)
        conn.watched.discard(uri)
        if self._can_subscribe(conn) and not listens(conn.session):
            await conn.request(
                types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri)),
                types.EmptyResult, what=f"resources/unsubscribe {uri!r}")

    @staticmethod
    def _can_subscribe(conn: ServerConnection) -> bool:
        caps = conn.capabilities
        return bool(caps is not None and caps.resources is not None and caps.resources.subscribe)

    async def complete(
        self,
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None = None,
    ) -> types.Completion:
        """``completion/complete`` for an upstream prompt or resource template."""
        catalog = self._get_catalog()
        if isinstance(ref, types.PromptReference):
            target = catalog.prompt_map.get(ref.name)
            if target is None:
                raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {ref.name}")
            conn, raw = target
            upstream_ref: types.PromptReference | types.ResourceTemplateReference = (
                ref.model_copy(update={"name": raw}))
        else:
            owner = catalog.template_map.get(ref.uri)
            conn = owner if owner is not None else self._resource_owner(ref.uri)
            own = _upstream_uri(conn, ref.uri)  # a skill:// template is namespaced
            upstream_ref = ref if own == ref.uri else ref.model_copy(update={"uri": own})
        if not conn.supports("completions"):
            return types.Completion(values=[])
        result = await conn.request(
            types.CompleteRequest(params=types.CompleteRequestParams(
                ref=upstream_ref, argument=argument, context=context)),
            types.CompleteResult, what="completion/complete")
        return result.completion

    async def set_logging_level(self, level: types.LoggingLevel) -> None:
        """Forward ``logging/setLevel`` to every ready server that supports logging."""
        self._log_level = level
        targets = [c for c in self._connections.values()
                   if c.session is not None and c.supports("logging")]

        async def one(conn: ServerConnection) -> None:
            try:
                await conn.request(
                    types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)),
                    types.EmptyResult, what="logging/setLevel")
            except MCPError as exc:
                logger.warning("upstream %s: logging/setLevel failed: %s", conn.name,
                               exc.message, extra={"server": conn.name})

        async with anyio.create_task_group() as tg:
            for conn in targets:
                tg.start_soon(one, conn)


def _secret_values(config: HubConfig) -> set[str]:
    """Interpolated values, header values and OAuth client secrets: never in errors,
    logs or status."""
    values = set(config.secret_values)
    for server in config.servers.values():
        values.update(server.headers.values())
        for value in server.headers.values():
            values.update(part for part in value.split() if len(part) >= 8)
        if server.oauth.client_secret:
            values.add(server.oauth.client_secret)
        if server.oauth.idp_client_secret:
            values.add(server.oauth.idp_client_secret)
    return values


def _differs(a: ServerConfig, b: ServerConfig) -> bool:
    """Whether the connection must restart (a new pin policy or new tool rewrites only
    need a new listing)."""
    same = {"pin_policy", "tools"}
    return (a.model_dump(exclude=same) != b.model_dump(exclude=same)
            or a.search_path != b.search_path)


def _upstream_uri(conn: ServerConnection, uri: str) -> str:
    """The address ``conn`` itself uses for ``uri`` (an app or skill address without its
    namespace)."""
    app = split_namespaced(uri)
    return app[1] if app is not None and app[0] == conn.name else uri
