"""One supervised connection to one upstream MCP server.

:class:`ServerConnection.run` is the only task that touches the connection's
``async with`` stack (transport + ``ClientSession``): it connects, initializes,
lists everything, registers the tools, then serves until the connection is lost,
and starts over with backoff. Calls from any number of downstream requests are
multiplexed on the one long-lived session: a call is a JSON-RPC request on it,
nothing more.

Per-call rules:

- Timeout ``timeout`` (per server), reset by every upstream progress
  notification for that call, never beyond ``max_call_seconds`` from the start;
  paused while a sampling or elicitation request of that call is being answered
  downstream (a person or a model is the slow party then, not the server). On
  timeout the request is cancelled upstream (``notifications/cancelled``) and
  the result is an ``isError`` result naming the server and the timeout.
- Cancelling the awaiting task (a downstream ``notifications/cancelled``)
  cancels the upstream request the same way.
- A call in flight when the connection dies fails at once. It is retried once,
  after the reconnect, only when the tool is ``readOnlyHint: true``; a call made
  while the server is (re)connecting waits for it (bounded) and is then sent.

Server-to-client requests (sampling, elicitation, roots/list) and log messages
from the upstream are routed to the :class:`~mcp_hub.context.CallContext` of the
call that caused them. Over Streamable HTTP the SDK delivers them in the
context of the request that caused them, so the routing is exact; on stdio and
SSE the wire does not say, and the rule is: the most recent call in flight on
that server whose downstream client has the capability. With none, the
upstream gets an error response saying so (a log message goes to ``on_log``).
"""

from __future__ import annotations

import contextvars
import fnmatch
import itertools
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import anyio
import mcp.types as types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_hub.config import HubSettings, ServerConfig
from mcp_hub.context import CallContext
from mcp_hub.naming import exposed_name
from mcp_hub.pins import PinStore
from mcp_hub.redact import redact
from mcp_hub.sanitize import clean_description, clean_tool_definition
from mcp_hub.upstream.modern import (
    follow_changes,
    keepalive_request,
    open_session,
    send_resolving_rounds,
)
from mcp_hub.upstream.status import ServerState, UpstreamStatus
from mcp_hub.upstream.transports import (
    INVALID_RESPONSE,
    ConnectFailure,
    TransportProbe,
    open_transport,
)

__all__ = ["ConnectionHooks", "ServerConnection", "ToolRecord"]

logger = logging.getLogger("mcp_hub.upstream")

Kind = Literal["tools", "prompts", "resources"]
ResultT = TypeVar("ResultT", bound=BaseModel)
RelayT = TypeVar("RelayT")

BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 60.0
BACKOFF_JITTER = 0.2
PARK_PROBE_SECONDS = 300.0
#: Bursts of list_changed notifications within this window become one refresh.
REFRESH_DEBOUNCE = 0.02
#: A list_changed this long after the previous refresh starts a new burst (no wait).
REFRESH_IDLE = 0.25
_MAX_PAGES = 1000

_current_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "mcp_hub_upstream_call", default=None
)


@dataclass
class ConnectionHooks:
    """How a connection tells its manager about changes (all cheap, never raise)."""

    changed: Callable[[str, Kind], None]
    resource_updated: Callable[[str], Awaitable[None]] | None = None
    log: Callable[[str, types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
    logging_level: Callable[[], types.LoggingLevel | None] = lambda: None
    #: Called after every state or catalog change, for waiters (``UpstreamManager.wait_until``).
    pulse: Callable[[], None] = lambda: None
    #: ``yields_to(server, holder_toolset)``: leave the name to the holder (file order).
    yields_to: Callable[[str, str], bool] = lambda server, toolset: False
    client_name: str = "mcp-hub"
    client_version: str = "0.1.0"
    #: Tool pins (trust on first use); None when pinning is unavailable.
    pins: PinStore | None = None
    #: The hub's own answer to a ``roots/list`` no downstream call can take (mcp_hub.roots).
    roots: Callable[[], types.ListRootsResult] | None = None


@dataclass(slots=True)
class ToolRecord:
    """One upstream tool as registered: its exposed name and MCP definition."""

    raw: str
    exposed: str
    schema: dict[str, Any]
    read_only: bool


class _Lost(Exception):
    """The connection died while a request was in flight.

    ``reached`` is False when the server provably never ran the request (an HTTP
    session the server no longer knows: it answered 404 before doing anything).
    """

    def __init__(self, reason: str, *, reached: bool = True) -> None:
        super().__init__(reason)
        self.reached = reached


class _Call:
    """A request in flight on this server: routing target and adjustable deadline."""

    __slots__ = ("call", "conn", "hard_deadline", "pauses", "remaining", "scope", "timeout")

    def __init__(self, conn: ServerConnection, call: CallContext | None, timeout: float,
                 hard_deadline: float) -> None:
        self.conn = conn
        self.call = call
        self.timeout = timeout
        self.hard_deadline = hard_deadline
        self.scope: anyio.CancelScope | None = None
        self.pauses = 0
        self.remaining = 0.0

    def extend(self) -> None:
        """Upstream progress: the timeout starts again (bounded by the hard deadline)."""
        scope = self.scope
        if scope is not None and not self.pauses:
            scope.deadline = min(anyio.current_time() + self.timeout, self.hard_deadline)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the clock while the downstream client answers a request of this call."""
        scope = self.scope
        if scope is None:
            yield
            return
        if not self.pauses:
            self.remaining = scope.deadline - anyio.current_time()
            scope.deadline = math.inf
        self.pauses += 1
        try:
            yield
        finally:
            self.pauses -= 1
            if not self.pauses:
                scope.deadline = min(anyio.current_time() + max(self.remaining, 0.0),
                                     self.hard_deadline)


def _matches(name: str, patterns: list[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


def _error_text(exc: BaseException) -> str:
    """A one-line description of a failure, exception groups unwrapped, secrets redacted."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in _leaves(exc)
                  if not isinstance(e, anyio.get_cancelled_exc_class())]
        if leaves:
            exc = leaves[0]
    if isinstance(exc, ConnectFailure | MCPError):
        text = exc.message
    else:
        text = str(exc) or type(exc).__name__
        if type(exc).__name__ not in text:
            text = f"{type(exc).__name__}: {text}"
    return redact(text)


def _validation_summary(exc: ValidationError, result_type: type[BaseModel]) -> str:
    """One line: which result type was expected and the first thing wrong with it."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0] if errors else None
    where = ".".join(str(p) for p in first["loc"]) if first else ""
    what = f"{where}: {first['msg']}" if first else "does not validate"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"the result is not a valid {result_type.__name__} ({what}{more})"


_ItemT = TypeVar("_ItemT", bound=BaseModel)


def _clean_item(item: _ItemT) -> _ItemT:
    """A prompt, resource or template with invisible characters removed from its
    human-facing text (description, title)."""
    update: dict[str, str] = {}
    for key in ("description", "title"):
        value = getattr(item, key, None)
        if isinstance(value, str) and value:
            cleaned = clean_description(value)
            if cleaned != value:
                update[key] = cleaned
    return item.model_copy(update=update) if update else item


def _clean_prompt(prompt: types.Prompt) -> types.Prompt:
    prompt = _clean_item(prompt)
    if prompt.arguments:
        args = [_clean_item(a) for a in prompt.arguments]
        if any(a is not b for a, b in zip(args, prompt.arguments, strict=True)):
            prompt = prompt.model_copy(update={"arguments": args})
    return prompt


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from _leaves(e)
        else:
            yield e


def _classify(exc: BaseException, probe: TransportProbe, config: ServerConfig) -> ConnectFailure:
    """Translate a connect failure into a :class:`ConnectFailure` (permanent or not)."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in _leaves(exc)
                  if not isinstance(e, anyio.get_cancelled_exc_class())]
        for leaf in leaves:
            if isinstance(leaf, ConnectFailure):
                return leaf
        if leaves:
            exc = leaves[0]
    if isinstance(exc, ConnectFailure):
        return exc
    auth = [s for s in probe.statuses if s in (401, 403)]
    if auth:
        return ConnectFailure(
            f"HTTP {auth[-1]} from {redact(config.url or '')}: not authorized "
            "(check the server's headers)", permanent=True)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and status in (401, 403):
        return ConnectFailure(f"HTTP {status}: not authorized (check the server's headers)",
                              permanent=True)
    if isinstance(status, int) and status in (404, 405, 406, 415):
        return ConnectFailure(f"HTTP {status}: {redact(config.url or '')} is not an MCP endpoint",
                              permanent=True)
    if isinstance(exc, MCPError):
        if exc.code == types.METHOD_NOT_FOUND and probe.statuses:
            return ConnectFailure(
                f"HTTP {probe.statuses[-1]}: {redact(config.url or '')} is not an MCP endpoint",
                permanent=True)
        if "Unexpected content type" in exc.message:
            return ConnectFailure(f"not an MCP endpoint: {redact(exc.message)}", permanent=True)
    return ConnectFailure(_error_text(exc))


class ServerConnection:
    """Supervisor, session owner and call router for one upstream server."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        settings: HubSettings,
        registry: Any,
        hooks: ConnectionHooks,
    ) -> None:
        self.name = name
        self.config = config
        self.settings = settings
        self.registry = registry
        self.hooks = hooks
        self.toolset = f"mcp-{name}"
        self.prefix = config.effective_prefix(name)
        #: Every log line about this server carries ``server`` (``--log-format json``).
        self.log = logging.LoggerAdapter(logger, {"server": name})

        self.state = ServerState.CONNECTING if config.enabled else ServerState.DISABLED
        self.state_since = time.time()
        self.last_error: str | None = None
        self.reconnects = 0
        self.connect_ms: float | None = None
        self.server_info: types.Implementation | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self.session: ClientSession | None = None

        self.tools: dict[str, ToolRecord] = {}
        self.exposed: dict[str, str] = {}  # exposed → raw
        self.rejected: dict[str, str] = {}
        #: Exposed names hidden because their tool changed since it was pinned (policy block).
        self.pin_blocked: set[str] = set()
        self.prompts: list[types.Prompt] = []
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        self.subscriptions: set[str] = set()

        #: Set once the first attempt has finished (ready, parked or failed).
        self.first_done = anyio.Event()
        self.stopped = anyio.Event()
        self._ready = anyio.Event()
        self._session_changed = anyio.Event()
        self._lost = anyio.Event()
        self._lost_reason = ""
        self._wake = anyio.Event()
        self._refresh_wanted = anyio.Event()
        self._refresh_kinds: set[Kind] = set()
        self._inflight: dict[int, _Call] = {}
        self._ids = itertools.count()
        self._scope: anyio.CancelScope | None = None
        self._probe: TransportProbe | None = None

    # ── status ────────────────────────────────────────────────────────────────

    def status(self) -> UpstreamStatus:
        info = None
        if self.server_info is not None:
            info = {"name": self.server_info.name, "version": self.server_info.version}
        return UpstreamStatus(
            name=self.name,
            state=self.state,
            transport=self.config.transport or "stdio",
            tools=len(self.tools),
            prompts=len(self.prompts),
            resources=len(self.resources),
            last_error=self.last_error,
            reconnects=self.reconnects,
            state_since=self.state_since,
            connect_ms=self.connect_ms,
            server_info=info,
            rejected_tools=self._rejections(),
            in_flight=len(self._inflight),
        )

    def _rejections(self) -> dict[str, str]:
        """Refused names, plus names another upstream took over after we registered them."""
        out = dict(self.rejected)
        for rec in self.tools.values():
            if rec.exposed in out:
                continue
            entry = self.registry.get_entry(rec.exposed)
            if entry is not None and entry.toolset != self.toolset:
                out[rec.exposed] = (
                    f"shadowed by toolset {entry.toolset!r} (later in servers.toml wins)"
                    if entry.toolset.startswith("mcp-")
                    else f"name held by {entry.origin} tool of toolset {entry.toolset!r}")
        return out

    @property
    def pid(self) -> int | None:
        """Process id of the stdio child while one runs (it leads its own process group)."""
        probe = self._probe
        return probe.pid if probe is not None and self.config.transport == "stdio" else None

    def _set_state(self, state: ServerState) -> None:
        if state is not self.state:
            self.state = state
            self.state_since = time.time()
            self.hooks.pulse()
            self.log.info("upstream %s: %s%s", self.name, state.value,
                        f" ({self.last_error})" if self.last_error and state in
                        (ServerState.RECONNECTING, ServerState.PARKED) else "")

    # ── supervision ───────────────────────────────────────────────────────────

    async def run(self) -> None:
        """Connect, serve, reconnect with backoff or park; until cancelled."""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                await self._supervise()
        finally:
            self._go_down()
            self.first_done.set()
            self.stopped.set()

    def stop(self) -> None:
        """Ask :meth:`run` to end (it deregisters everything on its way out)."""
        if self._scope is not None:
            self._scope.cancel()

    def wake(self) -> None:
        """Cut a backoff or park wait short: try again now."""
        self._wake.set()

    async def _supervise(self) -> None:
        failures = 0
        while True:
            probe = self._probe = TransportProbe()
            served = False
            try:
                served = await self._connect_and_serve(probe)
                failure = ConnectFailure(self._lost_reason or "connection closed")
            except ConnectFailure as exc:
                failure = exc
            except Exception as exc:
                failure = _classify(exc, probe, self.config)
            finally:
                self._go_down()
            if probe.stderr_tail and not served:
                failure.message += " — stderr: " + redact(" | ".join(probe.stderr_tail))[-500:]
            self.last_error = failure.message
            self.first_done.set()
            if failure.permanent:
                self.log.error("upstream %s parked: %s", self.name, failure.message)
                self._set_state(ServerState.PARKED)
                await self._pause(PARK_PROBE_SECONDS)
                failures = 0
            else:
                failures = 0 if served else failures + 1
                delay = min(BACKOFF_INITIAL * 2 ** max(failures - 1, 0), BACKOFF_MAX)
                delay *= 1 + random.uniform(-BACKOFF_JITTER, BACKOFF_JITTER)
                self.log.warning("upstream %s: %s; reconnecting in %.1f s", self.name,
                               failure.message, delay)
                self._set_state(ServerState.RECONNECTING)
                await self._pause(delay)
            self.reconnects += 1
            if self.state is ServerState.PARKED:
                self._set_state(ServerState.RECONNECTING)
            self._announce_session_change()

    async def _pause(self, seconds: float) -> None:
        self._wake = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    def _mark_lost(self, reason: str) -> None:
        if not self._lost.is_set():
            self._lost_reason = reason
            self._lost.set()
            self.hooks.pulse()

    async def _connect_and_serve(self, probe: TransportProbe) -> bool:
        """One connection's lifetime; returns True if it got to ready."""
        self._lost = anyio.Event()
        self._lost_reason = ""
        started = anyio.current_time()
        timeout = self.config.connect_timeout
        ready = False
        with anyio.CancelScope(deadline=started + timeout) as connect_scope:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(
                    open_transport(self.name, self.config, probe=probe, on_eof=self._mark_lost)
                )
                session = ClientSession(
                    read,
                    write,
                    sampling_callback=self._on_sampling,
                    elicitation_callback=self._on_elicitation,
                    list_roots_callback=self._on_list_roots,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    client_info=types.Implementation(
                        name=self.hooks.client_name, version=self.hooks.client_version
                    ),
                )
                await stack.enter_async_context(session)
                # Handshake or discovery, per [servers.NAME] protocol (mcp_hub.upstream.modern).
                self.server_info, self.capabilities = await open_session(
                    session, self.config.protocol)
                await self._sync(session, {"tools", "prompts", "resources"}, initial=True)
                await self._restore_session_state(session)
                connect_scope.deadline = math.inf
                self.connect_ms = (anyio.current_time() - started) * 1000
                self.session = session
                self.last_error = None
                ready = True
                self._set_state(ServerState.READY)
                self._ready.set()
                self._announce_session_change()
                self.first_done.set()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._keepalive, session)
                    tg.start_soon(self._refresh_loop, session)
                    tg.start_soon(follow_changes, session, self.request_refresh)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
                # Tools leave now, not after the transport has finished closing.
                self.last_error = redact(self._lost_reason)
                self._set_state(ServerState.RECONNECTING)
                self._go_down()
        if connect_scope.cancelled_caught and not ready:
            raise ConnectFailure(
                f"no answer within connect_timeout ({timeout:g} s)"
                + (f": {self._lost_reason}" if self._lost_reason else "")
            )
        return ready

    def _go_down(self) -> None:
        """The session is gone: forget it and take this server's tools out of the registry."""
        if self.session is not None:
            self.session = None
            self._ready = anyio.Event()
            self._announce_session_change()
        had_tools = bool(self.tools)
        had_prompts = bool(self.prompts)
        had_resources = bool(self.resources or self.templates)
        if had_tools:
            removed = self.registry.deregister_toolset(self.toolset)
            self.log.debug("upstream %s: deregistered %d tools", self.name, len(removed))
        self.tools = {}
        self.exposed = {}
        self.rejected = {}
        self.pin_blocked = set()
        if self.hooks.pins is not None:
            # Only the live view (blocked, flagged) is forgotten; pins and recorded
            # changes stay in the file, and the next listing checks again.
            self.hooks.pins.forget_server(self.name)
        self.prompts = []
        self.resources = []
        self.templates = []
        if had_tools:
            self.hooks.changed(self.name, "tools")
        if had_prompts:
            self.hooks.changed(self.name, "prompts")
        if had_resources:
            self.hooks.changed(self.name, "resources")

    async def _restore_session_state(self, session: ClientSession) -> None:
        level = self.hooks.logging_level()
        if level is not None and self.supports("logging"):
            await self._quiet(session, types.SetLevelRequest(
                params=types.SetLevelRequestParams(level=level)))
        for uri in sorted(self.subscriptions):
            await self._quiet(session, types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri=uri)))

    async def _quiet(self, session: ClientSession, request: Any) -> None:
        try:
            await session.send_request(request, types.EmptyResult,
                                       request_read_timeout_seconds=self.config.connect_timeout)
        except MCPError as exc:
            self.log.warning("upstream %s: %s failed: %s", self.name, request.method,
                           redact(exc.message))

    async def notify_roots_changed(self) -> None:
        """Send ``notifications/roots/list_changed`` on the live session, if any."""
        session = self._live()
        if session is None:
            return
        try:
            await session.send_notification(types.RootsListChangedNotification())
        except Exception as exc:
            self.log.debug("upstream %s: roots/list_changed not sent: %s", self.name,
                           _error_text(exc))

    def supports(self, feature: str) -> bool:
        caps = self.capabilities
        return caps is not None and getattr(caps, feature, None) is not None

    # ── background tasks of a live session ────────────────────────────────────

    async def _keepalive(self, session: ClientSession) -> None:
        interval = self.config.keepalive_interval
        if interval <= 0:
            return
        ping_timeout = min(max(interval, 5.0), 30.0)
        while True:
            await anyio.sleep(interval)
            try:
                probe, answer = keepalive_request(session)
                await session.send_request(probe, answer,
                                           request_read_timeout_seconds=ping_timeout)
            except MCPError as exc:
                if self._is_fatal(exc):
                    self._mark_lost(f"keepalive ping failed: {exc.message}")
                    return
            except Exception as exc:
                self._mark_lost(f"keepalive ping failed: {_error_text(exc)}")
                return

    def _is_fatal(self, exc: MCPError) -> bool:
        return exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT) or (
            self._session_gone(exc))

    def _session_gone(self, exc: MCPError) -> bool:
        """An HTTP 404 for our session id: the server restarted or expired the session."""
        if self.config.transport != "http":
            return False
        if exc.message in ("Session terminated", "Session not found"):
            return True
        probe = self._probe
        return probe is not None and probe.last_status == 404 and exc.code in (
            types.INVALID_REQUEST, types.REQUEST_TIMEOUT)

    def request_refresh(self, kind: Kind) -> None:
        self._refresh_kinds.add(kind)
        self._refresh_wanted.set()

    async def _refresh_loop(self, session: ClientSession) -> None:
        """Apply list_changed notifications one refresh at a time, coalescing bursts."""
        last_refresh = float("-inf")
        while True:
            await self._refresh_wanted.wait()
            if anyio.current_time() - last_refresh < REFRESH_IDLE:
                # Inside a burst: let it settle briefly so one listing covers many changes.
                await anyio.sleep(REFRESH_DEBOUNCE)
            # else: the first change after a quiet spell is applied at once.
            last_refresh = anyio.current_time()
            kinds = self._refresh_kinds
            self._refresh_kinds = set()
            self._refresh_wanted = anyio.Event()
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    await self._sync(session, kinds)
            except MCPError as exc:
                if self._is_fatal(exc):
                    self._mark_lost(f"refresh failed: {exc.message}")
                    return
                self.log.warning("upstream %s: refresh of %s failed: %s", self.name,
                               ", ".join(sorted(kinds)), redact(exc.message))
            except TimeoutError:
                self._mark_lost("refresh timed out")
                return
            except Exception as exc:
                self.log.warning("upstream %s: refresh of %s failed: %s", self.name,
                               ", ".join(sorted(kinds)), _error_text(exc))

    # ── listing and registration ──────────────────────────────────────────────

    async def _list_all(self, session: ClientSession, kind: str) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page: Any
            if kind == "tools":
                page = await session.list_tools(params=params)
                items.extend(page.tools)
            elif kind == "prompts":
                page = await session.list_prompts(params=params)
                items.extend(page.prompts)
            elif kind == "resources":
                page = await session.list_resources(params=params)
                items.extend(page.resources)
            else:
                page = await session.list_resource_templates(params=params)
                items.extend(page.resource_templates)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return items

    async def _sync(self, session: ClientSession, kinds: set[Kind], *, initial: bool = False
                    ) -> None:
        if "tools" in kinds and self.supports("tools"):
            tools = await self._list_all(session, "tools")
            if self._apply_tools(tools):
                self.hooks.changed(self.name, "tools")
        if "prompts" in kinds and self.supports("prompts"):
            prompts = [_clean_prompt(p) for p in await self._list_all(session, "prompts")]
            if prompts != self.prompts:
                self.prompts = prompts
                self.hooks.changed(self.name, "prompts")
        if "resources" in kinds and self.supports("resources"):
            resources = [_clean_item(r) for r in await self._list_all(session, "resources")]
            try:
                templates = [_clean_item(t) for t in await self._list_all(session, "templates")]
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
                templates = []
            if resources != self.resources or templates != self.templates:
                self.resources = resources
                self.templates = templates
                self.hooks.changed(self.name, "resources")

    def _wanted(self, raw: str) -> bool:
        include, exclude = self.config.include, self.config.exclude
        if include and not _matches(raw, include):
            return False
        return not (exclude and _matches(raw, exclude))

    def _apply_tools(self, tools: list[types.Tool]) -> bool:
        """Diff the new listing against what is registered; (de)register only the difference."""
        sep = self.settings.tool_name_separator
        max_len = self.settings.max_tool_name_length
        new: dict[str, ToolRecord] = {}
        taken: dict[str, str] = {}
        raw_defs: dict[str, dict[str, Any]] = {}
        for tool in sorted(tools, key=lambda t: t.name):
            raw = tool.name
            if not self._wanted(raw) or raw in new:
                continue
            name = exposed_name(self.prefix, raw, sep, max_len)
            if name in taken:
                self.log.warning("upstream %s: tools %r and %r both map to %r; keeping the first",
                               self.name, taken[name], raw, name)
                continue
            taken[name] = raw
            # Pins fingerprint what the upstream sent; the model reads the cleaned copy.
            raw_def = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            raw_def.pop("resultType", None)
            raw_defs[raw] = raw_def
            schema = clean_tool_definition(raw_def)
            schema["name"] = name
            ann = tool.annotations
            new[raw] = ToolRecord(raw, name, schema,
                                  bool(ann is not None and ann.read_only_hint))
        blocked = self._check_pins(raw_defs, new)
        for raw in blocked:
            del new[raw]
        old = self.tools
        removed = [r for r in old.values() if r.raw not in new or new[r.raw].exposed != r.exposed]
        changed = [r for r in new.values()
                   if r.raw not in old or old[r.raw].schema != r.schema
                   or r.exposed in self.rejected]
        if not removed and not changed:
            self._mark_blocked(blocked)
            return False
        registry = self.registry
        with registry.batch():
            for rec in removed:
                entry = registry.get_entry(rec.exposed)
                if entry is not None and entry.toolset == self.toolset:
                    registry.deregister(rec.exposed)
                self.rejected.pop(rec.exposed, None)
            for rec in changed:
                self._register(rec)
        self._mark_blocked(blocked)
        self.tools = new
        self.exposed = {r.exposed: r.raw for r in new.values()}
        self.log.info("upstream %s: %d tools (%d registered or updated, %d removed)", self.name,
                    len(new), len(changed), len(removed))
        return True

    def _check_pins(self, raw_defs: dict[str, dict[str, Any]],
                    records: dict[str, ToolRecord]) -> dict[str, str]:
        """Check this listing against the pins; the blocked tools (raw → exposed name)."""
        pins = self.hooks.pins
        if pins is None or not raw_defs:
            return {}
        try:
            verdicts = pins.check_many(self.name, raw_defs)
        except Exception as exc:  # a broken pin file must not take the server down
            self.log.error("upstream %s: tool pins not checked: %s", self.name, _error_text(exc))
            return {}
        return {raw: records[raw].exposed for raw, verdict in verdicts.items()
                if verdict.blocked and raw in records}

    def _mark_blocked(self, blocked: dict[str, str]) -> None:
        """Show the tools hidden by their pins as rejected, with how to accept them."""
        for exposed in self.pin_blocked - set(blocked.values()):
            self.rejected.pop(exposed, None)
        for raw, exposed in blocked.items():
            self.rejected[exposed] = (
                f"changed since pinned; run: mcp-hub pins accept {self.name}/{raw}")
        if self.pin_blocked != set(blocked.values()):
            self.pin_blocked = set(blocked.values())
            self.hooks.pulse()

    def _register(self, rec: ToolRecord) -> bool:
        holder = self.registry.get_entry(rec.exposed)
        if (holder is not None and holder.toolset != self.toolset
                and self.hooks.yields_to(self.name, holder.toolset)):
            self.rejected[rec.exposed] = (
                f"shadowed by toolset {holder.toolset!r} (later in servers.toml wins)")
            return False
        ok: bool = self.registry.register(
            rec.exposed, self.toolset, rec.schema, self._handler(rec.raw),
            description=str(rec.schema.get("description") or ""), origin="upstream",
        )
        if ok:
            self.rejected.pop(rec.exposed, None)
        else:
            reason = "name held by another tool"
            for rej in self.registry.rejections:
                if rej.name == rec.exposed and rej.toolset == self.toolset:
                    reason = rej.reason
            self.rejected[rec.exposed] = reason
        return ok

    def reassert_tools(self) -> None:
        """Register again any of this server's tools whose name is free now."""
        registry = self.registry
        if self.session is None:
            return
        missing = [r for r in self.tools.values() if registry.get_entry(r.exposed) is None]
        if missing:
            with registry.batch():
                for rec in missing:
                    self._register(rec)

    def _handler(self, raw: str) -> Callable[..., Awaitable[types.CallToolResult]]:
        async def forward(
            args: dict[str, Any] | None, *, call: CallContext | None = None, **_: Any
        ) -> types.CallToolResult:
            return await self.call_tool(raw, args, call)

        forward.__name__ = f"upstream_{self.name}_tool"
        return forward

    # ── calls ─────────────────────────────────────────────────────────────────

    def _error_result(self, text: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    def _live(self) -> ClientSession | None:
        session = self.session
        return session if session is not None and not self._lost.is_set() else None

    async def wait_session(self, budget: float, old: ClientSession | None = None
                           ) -> ClientSession | None:
        """A live session other than ``old``, waiting up to ``budget`` s while (re)connecting."""
        session = self._live()
        if session is not None and session is not old:
            return session
        if self.state in (ServerState.PARKED, ServerState.DISABLED) or budget <= 0:
            return None
        with anyio.move_on_after(budget):
            while True:
                await self._session_changed.wait()
                session = self._live()
                if session is not None and session is not old:
                    return session
                if self.state in (ServerState.PARKED, ServerState.DISABLED):
                    return None
        return None

    def _unavailable(self) -> str:
        text = f"Server '{self.name}' is {self.state.value}"
        if self.last_error:
            text += f": {self.last_error}"
        return text

    async def call_tool(
        self, raw: str, args: dict[str, Any] | None, call: CallContext | None
    ) -> types.CallToolResult:
        """Forward ``tools/call`` to the upstream; always returns a ``CallToolResult``."""
        config = self.config
        start = anyio.current_time()
        hard_deadline = start + config.max_call_seconds
        session = self._live()
        if session is None:
            session = await self.wait_session(min(config.timeout, config.connect_timeout))
            if session is None:
                return self._error_result(
                    f"{self._unavailable()}; tool '{raw}' was not called.")
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=raw, arguments=args))
        for attempt in (1, 2):
            try:
                result = await self._send(session, request, types.CallToolResult, call,
                                          config.timeout, hard_deadline)
            except TimeoutError:
                return self._error_result(
                    f"Server '{self.name}' did not answer tool '{raw}' within "
                    f"{config.timeout:g} s (timeout); the call was cancelled upstream.")
            except _Lost as exc:
                record = self.tools.get(raw)
                safe = not exc.reached or (record is not None and record.read_only)
                if attempt == 1 and safe:
                    budget = min(hard_deadline - anyio.current_time(), config.connect_timeout
                                 + BACKOFF_INITIAL * (1 + BACKOFF_JITTER))
                    retry_session = await self.wait_session(budget, old=session)
                    if retry_session is not None:
                        session = retry_session
                        self.log.info("upstream %s: retrying tool %s after reconnect (%s)",
                                    self.name, raw,
                                    "read-only" if exc.reached else "never reached the server")
                        continue
                return self._error_result(
                    f"Server '{self.name}' connection was lost during the call to tool "
                    f"'{raw}': {exc}. The call may or may not have completed.")
            except MCPError as exc:
                if exc.code == types.URL_ELICITATION_REQUIRED:
                    # A request to the client (open this URL), not a tool failure: it
                    # travels on as the JSON-RPC error it is, data included.
                    raise
                if exc.message.startswith(INVALID_RESPONSE):
                    return self._error_result(
                        f"Server '{self.name}' did not answer tool '{raw}' with a valid "
                        f"response: {redact(exc.message)}")
                return self._error_result(redact(exc.message))
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _announce_session_change(self) -> None:
        event = self._session_changed
        self._session_changed = anyio.Event()
        event.set()
        self.hooks.pulse()

    async def request(
        self,
        request: Any,
        result_type: type[ResultT],
        call: CallContext | None = None,
        *,
        what: str,
    ) -> ResultT:
        """Send a non-tool request (prompts/get, resources/read, …); errors are ``MCPError``."""
        config = self.config
        session = self._live() or await self.wait_session(
            min(config.timeout, config.connect_timeout))
        if session is None:
            raise MCPError(types.INTERNAL_ERROR, f"{self._unavailable()}; {what} failed.")
        start = anyio.current_time()
        try:
            return await self._send(session, request, result_type, call, config.timeout,
                                    start + config.max_call_seconds)
        except TimeoutError:
            raise MCPError(types.REQUEST_TIMEOUT,
                           f"Server '{self.name}' did not answer {what} within "
                           f"{config.timeout:g} s") from None
        except _Lost as exc:
            raise MCPError(types.INTERNAL_ERROR,
                           f"Server '{self.name}' connection was lost during {what}: {exc}"
                           ) from None

    async def _send(
        self,
        session: ClientSession,
        request: Any,
        result_type: type[ResultT],
        call: CallContext | None,
        call_timeout: float,
        hard_deadline: float,
    ) -> ResultT:
        """One request on the live session with the call's routing and deadline rules."""
        record = _Call(self, call, call_timeout, hard_deadline)
        key = next(self._ids)
        self._inflight[key] = record
        token = _current_call.set(record)

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            record.extend()
            if call is not None and call.progress_token is not None:
                await call.report_progress(progress, total, message)

        try:
            with anyio.CancelScope(
                deadline=min(anyio.current_time() + call_timeout, hard_deadline)
            ) as scope:
                record.scope = scope
                # A 2026-07-28 upstream's input rounds are resolved through ``call``.
                result: ResultT = await send_resolving_rounds(
                    session, request, result_type, call, record.paused,
                    progress_callback=on_progress)
            if scope.cancelled_caught:
                raise TimeoutError
            return result
        except ValidationError as exc:
            # A response to this request, but not of the shape the method returns.
            message = f"{INVALID_RESPONSE}: {_validation_summary(exc, result_type)}"
            self.log.warning("upstream %s: %s", self.name, message)
            raise MCPError(types.INTERNAL_ERROR, message) from None
        except MCPError as exc:
            if self._is_fatal(exc) and exc.code != types.REQUEST_TIMEOUT:
                session_gone = self._session_gone(exc)
                reason = self._lost_reason or (
                    "the server no longer knows this HTTP session" if session_gone
                    else exc.message)
                self._mark_lost(reason)
                raise _Lost(reason, reached=not session_gone) from None
            raise
        finally:
            _current_call.reset(token)
            del self._inflight[key]

    # ── server-to-client requests and notifications ───────────────────────────

    def _route(self, capable: Callable[[CallContext], bool] | None) -> _Call | None:
        current = _current_call.get()
        if current is not None and current.conn is self:
            # The transport told us which call caused this: never hand it to another client.
            call = current.call
            ok = call is not None and (capable is None or capable(call))
            return current if ok else None
        for record in reversed(self._inflight.values()):
            if record.call is not None and (capable is None or capable(record.call)):
                return record
        return None

    def _no_client(self, what: str, capability: str) -> types.ErrorData:
        if not self._inflight:
            why = "no downstream call is in flight on this server"
        else:
            why = f"no downstream client with a call in flight supports {capability}"
        return types.ErrorData(code=types.INVALID_REQUEST,
                               message=f"mcp-hub cannot relay {what}: {why}")

    async def _relay(
        self, record: _Call, what: str, fn: Callable[[], Awaitable[RelayT]]
    ) -> RelayT | types.ErrorData:
        with record.paused():
            try:
                return await fn()
            except MCPError as exc:
                return exc.error
            except Exception as exc:
                self.log.warning("upstream %s: relaying %s failed: %s", self.name, what,
                               _error_text(exc))
                return types.ErrorData(code=types.INTERNAL_ERROR,
                                       message=f"mcp-hub could not relay {what}: "
                                       f"{_error_text(exc)}")

    async def _on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        record = self._route(lambda c: c.can_sample)
        if record is None or record.call is None:
            return self._no_client("sampling/createMessage", "sampling")
        call = record.call
        return await self._relay(record, "sampling/createMessage",
                                 lambda: call.create_message(params))

    async def _on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        record = self._route(lambda c: c.can_elicit)
        if record is None or record.call is None:
            return self._no_client("elicitation/create", "elicitation")
        call = record.call
        return await self._relay(record, "elicitation/create", lambda: call.elicit(params))

    async def _on_list_roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        record = self._route(lambda c: c.can_list_roots)
        if record is None or record.call is None:
            if self.hooks.roots is not None:
                # Outside a call (or for a client without roots): the hub answers.
                return self.hooks.roots()
            return self._no_client("roots/list", "roots")
        call = record.call
        return await self._relay(record, "roots/list", call.list_roots)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        record = self._route(None)
        if record is not None and record.call is not None:
            await record.call.log(params.level, params.data, params.logger)
        elif self.hooks.log is not None:
            await self.hooks.log(self.name, params)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            text = (f"invalid message ({message.error_count()} validation errors)"
                    if isinstance(message, ValidationError) else _error_text(message))
            self.log.warning("upstream %s: transport error: %s", self.name, text)
            return
        if isinstance(message, types.ToolListChangedNotification):
            self.request_refresh("tools")
        elif isinstance(message, types.PromptListChangedNotification):
            self.request_refresh("prompts")
        elif isinstance(message, types.ResourceListChangedNotification):
            self.request_refresh("resources")
        elif (isinstance(message, types.ResourceUpdatedNotification)
              and self.hooks.resource_updated is not None):
                await self.hooks.resource_updated(str(message.params.uri))
