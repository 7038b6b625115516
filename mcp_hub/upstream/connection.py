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
from the upstream are routed to the :class:`~mcp_hub.pipeline.context.CallContext` of the
call that caused them. Over Streamable HTTP the SDK delivers them in the
context of the request that caused them, so the routing is exact; on stdio and
SSE the wire does not say, and the rule is: the most recent call in flight on
that server whose downstream client has the capability. With none, the
upstream gets an error response saying so (a log message goes to ``on_log``).
"""

from __future__ import annotations

import math
import random
from contextlib import AsyncExitStack
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_hub.config.model import HubSettings, ServerConfig
from mcp_hub.pipeline.context import CallContext
from mcp_hub.plumbing.bursts import settle_burst
from mcp_hub.redact import redact
from mcp_hub.upstream.by_hand import timeout_hint
from mcp_hub.upstream.calls import Calls
from mcp_hub.upstream.catalog import Catalog
from mcp_hub.upstream.conn_state import (
    BACKOFF_INITIAL,
    BACKOFF_JITTER,
    BACKOFF_MAX,
    ConnectionHooks,
    ConnectionState,
    Kind,
    ToolRecord,
)
from mcp_hub.upstream.failures import classify_connect_failure, error_text
from mcp_hub.upstream.list_hints import ListHint, refresh_when_stale
from mcp_hub.upstream.oauth.attach import wait_for_login
from mcp_hub.upstream.oauth.errors import NeedsLogin
from mcp_hub.upstream.relays import Relays
from mcp_hub.upstream.sessions.companion import Companion
from mcp_hub.upstream.sessions.lenient import upstream_session
from mcp_hub.upstream.sessions.listening import WatchedUris, follow_changes
from mcp_hub.upstream.sessions.modern import is_modern, keepalive_request, open_session
from mcp_hub.upstream.skills_probe import SkillsProbe
from mcp_hub.upstream.status import ServerState, UpstreamStatus
from mcp_hub.upstream.transports import ConnectFailure, TransportProbe, open_transport

__all__ = ["ConnectionHooks", "Kind", "ServerConnection", "ToolRecord"]

PARK_PROBE_SECONDS = 300.0
#: Bursts of list_changed notifications within this window become one refresh.
REFRESH_DEBOUNCE = 0.02
#: A list_changed this long after the previous refresh starts a new burst (no wait).
REFRESH_IDLE = 0.25

ResultT = TypeVar("ResultT", bound=BaseModel)


class _TaskStatus(BaseModel):
    """A ``notifications/tasks/status``'s params, kept whole (they are relayed as sent)."""

    model_config = ConfigDict(extra="allow")


class ServerConnection:
    """Supervisor, session owner and call router for one upstream server.

    The supervision (connect, serve, reconnect with backoff, park) lives here. The
    rest is composed: :attr:`shared` (:class:`ConnectionState`, what all of them
    read and write), :attr:`catalog` (the lists the upstream serves and their
    refresh), :attr:`calls` (the tool call path) and :attr:`relays` (what the
    upstream sends back). The properties and methods below are the public surface
    other modules use; each hands straight to the part that holds it.
    """

    def __init__(self, name: str, config: ServerConfig, settings: HubSettings,
                 registry: Any, hooks: ConnectionHooks) -> None:
        shared = self.shared = ConnectionState(name, config, settings, registry, hooks)
        self.calls = Calls(shared)
        self.catalog = Catalog(shared, self.calls.call_tool)
        self.relays = Relays(shared)
        self._scope: anyio.CancelScope | None = None
        self._wake = anyio.Event()

    async def run(self) -> None:
        """Connect, serve, reconnect with backoff or park; until cancelled."""
        shared = self.shared
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                await self._supervise()
        finally:
            self._go_down()
            shared.first_done.set()
            shared.stopped.set()

    def stop(self) -> None:
        """Ask :meth:`run` to end (it deregisters everything on its way out)."""
        if self._scope is not None:
            self._scope.cancel()

    def wake(self) -> None:
        """Cut a backoff or park wait short: try again now."""
        self._wake.set()

    async def _supervise(self) -> None:
        shared = self.shared
        failures = 0
        while True:
            probe = shared.probe = TransportProbe()
            served = False
            try:
                served = await self._connect_and_serve(probe)
                failure = ConnectFailure(shared.lost_reason or "connection closed")
            except ConnectFailure as exc:
                failure = exc
            except Exception as exc:
                failure = classify_connect_failure(exc, probe, shared.config)
            finally:
                self._go_down()
            if probe.stderr_tail and not served:
                failure.message += " — stderr: " + redact(" | ".join(probe.stderr_tail))[-500:]
            if failure.timed_out:
                failure.message += timeout_hint(shared.config, bool(probe.stderr_tail))
            shared.last_error = failure.message
            shared.first_done.set()
            if probe.needs_login is not None:
                await self._wait_for_login(probe.needs_login)
                failures = 0
            elif failure.permanent:
                shared.log.error("upstream %s parked: %s", shared.name, failure.message)
                shared.set_state(ServerState.PARKED)
                await self._pause(PARK_PROBE_SECONDS)
                failures = 0
            else:
                failures = 0 if served else failures + 1
                delay = min(BACKOFF_INITIAL * 2 ** max(failures - 1, 0), BACKOFF_MAX)
                delay *= 1 + random.uniform(-BACKOFF_JITTER, BACKOFF_JITTER)
                shared.log.warning("upstream %s: %s; reconnecting in %.1f s", shared.name,
                               failure.message, delay)
                shared.set_state(ServerState.RECONNECTING)
                await self._pause(delay)
            shared.reconnects += 1
            if shared.state in (ServerState.PARKED, ServerState.NEEDS_LOGIN):
                shared.set_state(ServerState.RECONNECTING)
            shared.announce_session_change()

    async def _wait_for_login(self, reason: str) -> None:
        """``needs_login``: no retries until ``mcp-hub login`` stores tokens (or a wake)."""
        shared = self.shared
        shared.last_error = str(NeedsLogin(shared.name, reason))
        shared.set_state(ServerState.NEEDS_LOGIN)
        self._wake = anyio.Event()
        await wait_for_login(shared.name, shared.config, self._wake)

    async def _pause(self, seconds: float) -> None:
        self._wake = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._wake.wait()

    async def _connect_and_serve(self, probe: TransportProbe) -> bool:
        """One connection's lifetime; returns True if it got to ready."""
        shared = self.shared
        shared.lost = anyio.Event()
        shared.lost_reason = ""
        started = anyio.current_time()
        timeout = shared.config.connect_timeout
        ready = False
        with anyio.CancelScope(deadline=started + timeout) as connect_scope:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(
                    open_transport(shared.name, shared.config, probe=probe, on_eof=shared.mark_lost,
                                   adopt_early=shared.hooks.adopt_early)
                )
                session = self._new_session(read, write)
                await stack.enter_async_context(session)
                # Handshake or discovery, per [servers.NAME] protocol (mcp_hub.upstream.sessions.modern).
                shared.server_info, shared.capabilities = await open_session(
                    session, shared.config.protocol)
                await self.catalog.sync(session, {"tools", "prompts", "resources"}, initial=True)
                await self._restore_session_state(session)
                connect_scope.deadline = math.inf
                shared.connect_ms = (anyio.current_time() - started) * 1000
                shared.session = session
                shared.last_error = None
                ready = True
                shared.set_state(ServerState.READY)
                shared.announce_session_change()
                shared.first_done.set()
                async with anyio.create_task_group() as tg:
                    shared.companion = self._companion_for(session, probe)
                    if shared.companion is not None:
                        tg.start_soon(shared.companion.serve)
                    tg.start_soon(self._keepalive, session)
                    tg.start_soon(self._refresh_loop, session)
                    tg.start_soon(follow_changes, session, shared.request_refresh, shared.watched)
                    tg.start_soon(refresh_when_stale, lambda: shared.list_hints, shared.request_refresh)
                    if probe.watch_tokens is not None:
                        tg.start_soon(probe.watch_tokens)
                    await shared.lost.wait()
                    tg.cancel_scope.cancel()
                shared.companion = None
                # Tools leave now, not after the transport has finished closing.
                shared.last_error = redact(shared.lost_reason)
                shared.set_state(ServerState.RECONNECTING)
                self._go_down()
        if connect_scope.cancelled_caught and not ready:
            raise ConnectFailure(
                f"no answer within connect_timeout ({timeout:g} s)"
                + (f": {shared.lost_reason}" if shared.lost_reason else ""),
                timed_out=True,
            )
        return ready

    def _new_session(self, read: Any, write: Any) -> ClientSession:
        """A session on ``read``/``write`` whose requests and notifications reach the hub."""
        shared = self.shared
        return upstream_session(
            read,
            write,
            server=shared.name,
            sampling_callback=self.relays.on_sampling,
            elicitation_callback=self.relays.on_elicitation,
            list_roots_callback=self.relays.on_list_roots,
            logging_callback=self.relays.on_log,
            message_handler=self.relays.on_message,
            notification_bindings=[NotificationBinding(
                method="notifications/tasks/status", params_type=_TaskStatus,
                handler=self._on_task_status)],
            client_info=types.Implementation(
                name=shared.hooks.client_name, version=shared.hooks.client_version
            ),
        )

    def _companion_for(self, session: ClientSession, probe: TransportProbe) -> Companion | None:
        """A lazily opened handshake session for 2025 clients, where one can be had: an
        upstream over Streamable HTTP reached in 2026-07-28 (mcp_hub.upstream.sessions.companion)."""
        shared = self.shared
        if shared.config.transport != "http" or not is_modern(session):
            return None

        async def open_second(stack: AsyncExitStack) -> ClientSession:
            read, write = await stack.enter_async_context(
                open_transport(shared.name, shared.config, probe=probe, on_eof=lambda _: None))
            return await stack.enter_async_context(self._new_session(read, write))

        return Companion(shared.name, open_second, shared.config.connect_timeout,
                         shared.config.keepalive_interval)

    async def _on_task_status(self, params: _TaskStatus) -> None:
        """The upstream's task status change: to the Hub, which knows the task's owner."""
        shared = self.shared
        relay = shared.hooks.task_status
        if relay is not None:
            try:
                await relay(shared.name, dict(params.model_extra or {}))
            except Exception:
                shared.log.exception("upstream %s: task status relay failed", shared.name)

    def _go_down(self) -> None:
        """The session is gone: forget it and take this server's tools out of the registry."""
        shared = self.shared
        if shared.session is not None:
            shared.session = None
            shared.announce_session_change()
        self.catalog.clear()

    async def _restore_session_state(self, session: ClientSession) -> None:
        shared = self.shared
        level = shared.hooks.logging_level()
        if level is not None and shared.supports("logging"):
            await self._quiet(session, types.SetLevelRequest(
                params=types.SetLevelRequestParams(level=level)))
        if is_modern(session):
            return  # its listen stream carries the subscriptions
        for uri in sorted(shared.watched.uris):
            await self._quiet(session, types.SubscribeRequest(
                params=types.SubscribeRequestParams(uri=uri)))

    async def _quiet(self, session: ClientSession, request: Any) -> None:
        shared = self.shared
        try:
            await session.send_request(request, types.EmptyResult,
                                       request_read_timeout_seconds=shared.config.connect_timeout)
        except MCPError as exc:
            shared.log.warning("upstream %s: %s failed: %s", shared.name, request.method,
                           redact(exc.message))

    async def notify_roots_changed(self) -> None:
        """Send ``notifications/roots/list_changed`` on the live session, if any."""
        shared = self.shared
        session = shared.live()
        if session is None:
            return
        try:
            await session.send_notification(types.RootsListChangedNotification())
        except Exception as exc:
            shared.log.debug("upstream %s: roots/list_changed not sent: %s", shared.name,
                           error_text(exc))

    async def _keepalive(self, session: ClientSession) -> None:
        shared = self.shared
        interval = shared.config.keepalive_interval
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
                if shared.is_fatal(exc):
                    shared.mark_lost(f"keepalive ping failed: {exc.message}")
                    return
            except Exception as exc:
                shared.mark_lost(f"keepalive ping failed: {error_text(exc)}")
                return

    async def _refresh_loop(self, session: ClientSession) -> None:
        """Apply list_changed notifications one refresh at a time, coalescing bursts."""
        shared = self.shared
        last_refresh = float("-inf")
        while True:
            await shared.refresh_wanted.wait()
            # Inside a burst: let it settle briefly so one listing covers many changes;
            # the first change after a quiet spell is applied at once.
            await settle_burst(last_refresh, idle=REFRESH_IDLE, debounce=REFRESH_DEBOUNCE)
            last_refresh = anyio.current_time()
            kinds, announced = shared.refresh_kinds, shared.announced_kinds
            shared.refresh_kinds, shared.announced_kinds = set(), set()
            shared.refresh_wanted = anyio.Event()
            try:
                with anyio.fail_after(shared.config.connect_timeout):
                    await self.catalog.sync(session, kinds, announced=announced)
            except MCPError as exc:
                if shared.is_fatal(exc):
                    shared.mark_lost(f"refresh failed: {exc.message}")
                    return
                shared.log.warning("upstream %s: refresh of %s failed: %s", shared.name,
                               ", ".join(sorted(kinds)), redact(exc.message))
            except TimeoutError:
                shared.mark_lost("refresh timed out")
                return
            except Exception as exc:
                shared.log.warning("upstream %s: refresh of %s failed: %s", shared.name,
                               ", ".join(sorted(kinds)), error_text(exc))

    # The public surface: each hands straight to the part that holds it.

    @property
    def name(self) -> str:
        """The server's name in servers.toml."""
        return self.shared.name

    @property
    def config(self) -> ServerConfig:
        """Its ``[servers.NAME]`` table (replaced in place by a reload that keeps it)."""
        return self.shared.config

    @config.setter
    def config(self, config: ServerConfig) -> None:
        self.shared.config = config

    @property
    def settings(self) -> HubSettings:
        """The hub's ``[hub]`` settings (replaced in place by a reload)."""
        return self.shared.settings

    @settings.setter
    def settings(self, settings: HubSettings) -> None:
        self.shared.settings = settings

    @property
    def hooks(self) -> ConnectionHooks:
        """How this connection tells its manager about changes."""
        return self.shared.hooks

    @property
    def prefix(self) -> str:
        """The prefix of its exposed tool names ("" when exposed without one)."""
        return self.shared.prefix

    @property
    def toolset(self) -> str:
        """The registry toolset its tools are registered under."""
        return self.shared.toolset

    @property
    def state(self) -> ServerState:
        """Lifecycle state: connecting, ready, reconnecting, parked, …"""
        return self.shared.state

    @property
    def last_error(self) -> str | None:
        """Why the last attempt failed or the last session was lost (None while fine)."""
        return self.shared.last_error

    @property
    def reconnects(self) -> int:
        """How many times the supervisor started over."""
        return self.shared.reconnects

    @property
    def state_since(self) -> float:
        """When it entered :attr:`state` (epoch seconds)."""
        return self.shared.state_since

    @property
    def connect_ms(self) -> float | None:
        """How long the last connection took to get ready."""
        return self.shared.connect_ms

    @property
    def server_info(self) -> types.Implementation | None:
        """The upstream's name and version, once connected."""
        return self.shared.server_info

    @property
    def capabilities(self) -> types.ServerCapabilities | None:
        """What the upstream declared, once connected."""
        return self.shared.capabilities

    @property
    def session(self) -> ClientSession | None:
        """The live session, or None while (re)connecting."""
        return self.shared.session

    @property
    def companion(self) -> Companion | None:
        """The handshake session beside a 2026-07-28 one, if there can be one."""
        return self.shared.companion

    @property
    def tools(self) -> dict[str, ToolRecord]:
        """Its registered tools by raw name."""
        return self.shared.tools

    @property
    def exposed(self) -> dict[str, str]:
        """Its exposed tool names, each to the raw name."""
        return self.shared.exposed

    @property
    def listed(self) -> list[types.Tool]:
        """Every tool of the last listing as the upstream sent it."""
        return self.shared.listed

    @property
    def rejected(self) -> dict[str, str]:
        """Exposed names not registered, each with why."""
        return self.shared.rejected

    @property
    def pin_blocked(self) -> set[str]:
        """Exposed names hidden because their tool changed since it was pinned."""
        return self.shared.pin_blocked

    @property
    def prompts(self) -> list[types.Prompt]:
        """Its prompts as last listed."""
        return self.shared.prompts

    @property
    def resources(self) -> list[types.Resource]:
        """Its resources as last listed."""
        return self.shared.resources

    @property
    def templates(self) -> list[types.ResourceTemplate]:
        """Its resource templates as last listed."""
        return self.shared.templates

    @property
    def list_hints(self) -> dict[str, ListHint]:
        """A 2026-07-28 upstream's cache hints per list kind."""
        return self.shared.list_hints

    @property
    def watched(self) -> WatchedUris:
        """The resource URIs its clients subscribed to."""
        return self.shared.watched

    @property
    def skills_probe(self) -> SkillsProbe:
        """Whether a 2025 session serves Agent Skills."""
        return self.shared.skills_probe

    @property
    def first_done(self) -> anyio.Event:
        """Set once the first attempt has finished (ready, parked or failed)."""
        return self.shared.first_done

    @property
    def stopped(self) -> anyio.Event:
        """Set when :meth:`run` has ended."""
        return self.shared.stopped

    @property
    def probe(self) -> TransportProbe | None:
        """What the current transport has seen (stderr tail, HTTP status), if any."""
        return self.shared.probe

    @property
    def pid(self) -> int | None:
        """Process id of the stdio child while one runs."""
        return self.shared.pid

    def status(self) -> UpstreamStatus:
        """What ``mcp-hub status`` and the ops views show of this server."""
        return self.shared.status()

    def supports(self, feature: str) -> bool:
        """Whether the upstream declared capability ``feature``."""
        return self.shared.supports(feature)

    def request_refresh(self, kind: Kind, *, announced: bool = False) -> None:
        """List ``kind`` again; ``announced``: because the upstream said it changed."""
        self.shared.request_refresh(kind, announced=announced)

    def takes_unlisted(self, raw: str) -> bool:
        """Whether a call of ``raw``, a tool it does not list, may be passed to it."""
        return self.catalog.takes_unlisted(raw)

    def reassert_tools(self) -> None:
        """Register again any of its tools whose name is free now."""
        self.catalog.reassert_tools()

    async def wait_session(self, budget: float, old: ClientSession | None = None
                           ) -> ClientSession | None:
        """A live session other than ``old``, waiting up to ``budget`` s."""
        return await self.calls.wait_session(budget, old)

    async def call_tool(
        self, raw: str, args: dict[str, Any] | None, call: CallContext | None,
        *, pass_errors: bool = False,
    ) -> types.CallToolResult:
        """Forward ``tools/call`` (:meth:`Calls.call_tool`; the registry's handlers of its
        listed tools call that directly)."""
        return await self.calls.call_tool(raw, args, call, pass_errors=pass_errors)

    async def raw_request(self, method: str, body: dict[str, Any],
                          call: CallContext | None = None) -> dict[str, Any]:
        """Send ``method`` with ``body`` and return the answer as sent (``tasks/*``)."""
        return await self.calls.raw_request(method, body, call)

    async def request(self, request: Any, result_type: type[ResultT],
                      call: CallContext | None = None, *, what: str) -> ResultT:
        """Send a non-tool request (prompts/get, resources/read, …); errors are ``MCPError``."""
        return await self.calls.request(request, result_type, call, what=what)
