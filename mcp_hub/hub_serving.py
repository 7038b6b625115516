"""The Hub's door for the serving side: list, call, read, subscribe, complete, status.

The transports (:mod:`mcp_hub.downstream`) reach the hub only through these
methods (and :meth:`Hub.call_tool`, :meth:`Hub.list_tools`, :meth:`Hub.status`).
Each one applies the caller's access policy and the start-up wait before it
touches the upstreams, so a transport cannot forget either. The Hub mixes this
class in; it owns the attributes declared here.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp import types

from mcp_hub.access import AccessControl, Caller, OpsView, remember_caller
from mcp_hub.apps import RenderedApps, app_session_key, split_ui
from mcp_hub.context import CallContext
from mcp_hub.log_levels import client_log_level, most_verbose, set_client_log_level
from mcp_hub.metrics import Metrics
from mcp_hub.sessions import SessionTracker
from mcp_hub.startup import StartupGate

if TYPE_CHECKING:
    from mcp_hub.upstream import UpstreamManager, UpstreamStatus

__all__ = ["ServingMixin"]

logger = logging.getLogger("mcp_hub.hub")


class ServingMixin:
    """What a transport may ask of the Hub besides tools (see the module docstring)."""

    access: AccessControl
    upstreams: UpstreamManager
    startup: StartupGate
    sessions: SessionTracker
    metrics: Metrics
    #: Resource subscriptions: uri -> connections that asked for it (changed only here).
    resource_subscribers: dict[str, list[Any]]
    #: Which servers' apps each client session read (routes an app's own tool names).
    rendered_apps: RenderedApps

    # ------------------------------------------------------------------ sessions
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

    # ------------------------------------------------------------------ operations views
    def ops_view(self, caller: Caller) -> OpsView:
        """What ``/status.json``, the status page and ``/metrics`` show this caller."""
        return self.access.ops_view(caller)

    def metrics_text(self, caller: Caller) -> str:
        """The ``/metrics`` body for this caller: its servers' and tools' series, its own counters."""
        return self.metrics.render(upstreams=self.upstreams.statuses(), list_changed=self.sessions.sent,
                                   sessions=self.sessions.count, view=self.access.ops_view(caller))

    # ------------------------------------------------------------------ prompts
    async def list_prompts(self, caller: Caller) -> list[types.Prompt]:
        await self.wait_lists()
        return self.access.prompts(caller, self.upstreams.list_prompts())

    async def get_prompt(self, caller: Caller, name: str, arguments: dict[str, str] | None,
                         call: CallContext | None) -> types.GetPromptResult:
        await self.wait_lists()
        self.access.check_prompt(caller, name)
        return await self.upstreams.get_prompt(name, arguments, call)

    # ------------------------------------------------------------------ resources
    async def list_resources(self, caller: Caller) -> list[types.Resource]:
        await self.wait_lists()
        return self.access.resources(caller, self.upstreams.list_resources())

    async def list_resource_templates(self, caller: Caller) -> list[types.ResourceTemplate]:
        await self.wait_lists()
        return self.access.templates(caller, self.upstreams.list_resource_templates())

    async def read_resource(self, caller: Caller, uri: str, call: CallContext | None
                            ) -> types.ReadResourceResult:
        await self.wait_lists()
        self.access.check_resource(caller, uri)
        result = await self.upstreams.read_resource(uri, call)
        app = split_ui(uri)
        if app is not None:  # the host is about to render this server's app
            self.rendered_apps.note(app_session_key(call), app[0])
        return result

    async def subscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        """``resources/subscribe`` for one connection; a closed session stops being a subscriber."""
        await self.wait_lists()
        self.access.check_resource(caller, uri)
        # Updates are filtered again at delivery by the caller remembered here.
        remember_caller(connection, caller)
        subs = self.resource_subscribers.setdefault(uri, [])
        if connection not in subs:
            subs.append(connection)
            stack = getattr(connection, "exit_stack", None)
            if stack is not None:
                # A closed session stops being a subscriber (and stops pinning its memory).
                stack.push_async_callback(self.drop_subscriber, uri, connection)
        await self.upstreams.subscribe_resource(uri)

    async def unsubscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        self.access.check_resource(caller, uri)
        subs = self.resource_subscribers.get(uri, [])
        if connection in subs:
            subs.remove(connection)
        if not subs:
            self.resource_subscribers.pop(uri, None)
            await self.upstreams.unsubscribe_resource(uri)

    async def drop_subscriber(self, uri: str, connection: Any) -> None:
        """``connection`` (a session, or a listen stream) no longer watches ``uri``."""
        subs = self.resource_subscribers.get(uri)
        if subs is None or connection not in subs:
            return
        subs.remove(connection)
        if not subs:
            self.resource_subscribers.pop(uri, None)
            try:
                await self.upstreams.unsubscribe_resource(uri)
            except Exception:
                logger.debug("unsubscribe after a session closed failed", exc_info=True)

    # ------------------------------------------------------------------ completion, logging
    async def complete(
        self, caller: Caller, ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument, context: types.CompletionContext | None,
    ) -> types.Completion:
        await self.wait_lists()
        self.access.check_completion(caller, ref)
        return await self.upstreams.complete(ref, argument, context)

    async def set_log_level(self, connection: Any, level: types.LoggingLevel) -> None:
        """``logging/setLevel`` of one client; upstreams log at the most verbose level asked."""
        set_client_log_level(getattr(connection, "state", None), level)
        levels: list[str] = [level]
        for other in self.sessions.connections():
            chosen = client_log_level(other.state)
            if chosen:
                levels.append(chosen)
        await self.upstreams.set_logging_level(most_verbose(levels))  # type: ignore[arg-type]
