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
from typing import Any

import anyio
import mcp.types as types
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_hub.plumbing.bursts import settle_burst
from mcp_hub.redact import redact
from mcp_hub.upstream.by_hand import timeout_hint
from mcp_hub.upstream.catalog import CatalogMixin
from mcp_hub.upstream.conn_state import (
    BACKOFF_INITIAL,
    BACKOFF_JITTER,
    BACKOFF_MAX,
    ConnectionHooks,
    Kind,
    ToolRecord,
)
from mcp_hub.upstream.failures import classify_connect_failure, error_text
from mcp_hub.upstream.list_hints import refresh_when_stale
from mcp_hub.upstream.oauth.attach import wait_for_login
from mcp_hub.upstream.oauth.errors import NeedsLogin
from mcp_hub.upstream.relays import RelaysMixin
from mcp_hub.upstream.sessions.companion import Companion
from mcp_hub.upstream.sessions.lenient import upstream_session
from mcp_hub.upstream.sessions.listening import follow_changes
from mcp_hub.upstream.sessions.modern import is_modern, keepalive_request, open_session
from mcp_hub.upstream.status import ServerState
from mcp_hub.upstream.transports import ConnectFailure, TransportProbe, open_transport

__all__ = ["ConnectionHooks", "Kind", "ServerConnection", "ToolRecord"]

PARK_PROBE_SECONDS = 300.0
#: Bursts of list_changed notifications within this window become one refresh.
REFRESH_DEBOUNCE = 0.02
#: A list_changed this long after the previous refresh starts a new burst (no wait).
REFRESH_IDLE = 0.25


class _TaskStatus(BaseModel):
    """A ``notifications/tasks/status``'s params, kept whole (they are relayed as sent)."""

    model_config = ConfigDict(extra="allow")


class ServerConnection(CatalogMixin, RelaysMixin):
    """Supervisor, session owner and call router for one upstream server.

    The supervision (connect, serve, reconnect with backoff, park) lives here;
    the catalog, calls and relays are mixins in their own modules.
    """

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
                failure = classify_connect_failure(exc, probe, self.config)
            finally:
                self._go_down()
            if probe.stderr_tail and not served:
                failure.message += " — stderr: " + redact(" | ".join(probe.stderr_tail))[-500:]
            if failure.timed_out:
                failure.message += timeout_hint(self.config, bool(probe.stderr_tail))
            self.last_error = failure.message
            self.first_done.set()
            if probe.needs_login is not None:
                await self._wait_for_login(probe.needs_login)
                failures = 0
            elif failure.permanent:
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
            if self.state in (ServerState.PARKED, ServerState.NEEDS_LOGIN):
                self._set_state(ServerState.RECONNECTING)
            self._announce_session_change()

    async def _wait_for_login(self, reason: str) -> None:
        """``needs_login``: no retries until ``mcp-hub login`` stores tokens (or a wake)."""
        self.last_error = str(NeedsLogin(self.name, reason))
        self._set_state(ServerState.NEEDS_LOGIN)
        self._wake = anyio.Event()
        await wait_for_login(self.name, self.config, self._wake)

    async def _pause(self, seconds: float) -> None:
        self._wake = anyio.Event()
        with anyio.move_on_after(seconds):
            await self._wake.wait()

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
                    open_transport(self.name, self.config, probe=probe, on_eof=self._mark_lost,
                                   adopt_early=self.hooks.adopt_early)
                )
                session = self._new_session(read, write)
                await stack.enter_async_context(session)
                # Handshake or discovery, per [servers.NAME] protocol (mcp_hub.upstream.sessions.modern).
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
                    self.companion = self._companion_for(session, probe)
                    if self.companion is not None:
                        tg.start_soon(self.companion.serve)
                    tg.start_soon(self._keepalive, session)
                    tg.start_soon(self._refresh_loop, session)
                    tg.start_soon(follow_changes, session, self.request_refresh, self.watched)
                    tg.start_soon(refresh_when_stale, lambda: self.list_hints, self.request_refresh)
                    if probe.watch_tokens is not None:
                        tg.start_soon(probe.watch_tokens)
                    await self._lost.wait()
                    tg.cancel_scope.cancel()
                self.companion = None
                # Tools leave now, not after the transport has finished closing.
                self.last_error = redact(self._lost_reason)
                self._set_state(ServerState.RECONNECTING)
                self._go_down()
        if connect_scope.cancelled_caught and not ready:
            raise ConnectFailure(
                f"no answer within connect_timeout ({timeout:g} s)"
                + (f": {self._lost_reason}" if self._lost_reason else ""),
                timed_out=True,
            )
        return ready

    def _new_session(self, read: Any, write: Any) -> ClientSession:
        """A session on ``read``/``write`` whose requests and notifications reach the hub."""
        return upstream_session(
            read,
            write,
            server=self.name,
            sampling_callback=self._on_sampling,
            elicitation_callback=self._on_elicitation,
            list_roots_callback=self._on_list_roots,
            logging_callback=self._on_log,
            message_handler=self._on_message,
            notification_bindings=[NotificationBinding(
                method="notifications/tasks/status", params_type=_TaskStatus,
                handler=self._on_task_status)],
            client_info=types.Implementation(
                name=self.hooks.client_name, version=self.hooks.client_version
            ),
        )

    def _companion_for(self, session: ClientSession, probe: TransportProbe) -> Companion | None:
        """A lazily opened handshake session for 2025 clients, where one can be had: an
        upstream over Streamable HTTP reached in 2026-07-28 (mcp_hub.upstream.sessions.companion)."""
        if self.config.transport != "http" or not is_modern(session):
            return None

        async def open_second(stack: AsyncExitStack) -> ClientSession:
            read, write = await stack.enter_async_context(
                open_transport(self.name, self.config, probe=probe, on_eof=lambda _: None))
            return await stack.enter_async_context(self._new_session(read, write))

        return Companion(self.name, open_second, self.config.connect_timeout,
                         self.config.keepalive_interval)

    async def _on_task_status(self, params: _TaskStatus) -> None:
        """The upstream's task status change: to the Hub, which knows the task's owner."""
        relay = self.hooks.task_status
        if relay is not None:
            try:
                await relay(self.name, dict(params.model_extra or {}))
            except Exception:
                self.log.exception("upstream %s: task status relay failed", self.name)

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
        self.skills_probe.forget()
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
        if is_modern(session):
            return  # its listen stream carries the subscriptions
        for uri in sorted(self.watched.uris):
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
                           error_text(exc))

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
                self._mark_lost(f"keepalive ping failed: {error_text(exc)}")
                return

    async def _refresh_loop(self, session: ClientSession) -> None:
        """Apply list_changed notifications one refresh at a time, coalescing bursts."""
        last_refresh = float("-inf")
        while True:
            await self._refresh_wanted.wait()
            # Inside a burst: let it settle briefly so one listing covers many changes;
            # the first change after a quiet spell is applied at once.
            await settle_burst(last_refresh, idle=REFRESH_IDLE, debounce=REFRESH_DEBOUNCE)
            last_refresh = anyio.current_time()
            kinds, announced = self._refresh_kinds, self._announced_kinds
            self._refresh_kinds, self._announced_kinds = set(), set()
            self._refresh_wanted = anyio.Event()
            try:
                with anyio.fail_after(self.config.connect_timeout):
                    await self._sync(session, kinds, announced=announced)
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
                               ", ".join(sorted(kinds)), error_text(exc))
