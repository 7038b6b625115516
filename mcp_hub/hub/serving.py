"""Prompts, resources, subscriptions, completion and the logging level, served for the Hub.

:class:`UpstreamServing` is one of the Hub's parts (the Hub holds it as
``Hub.upstream_serving`` and its serving methods hand these requests to it). Each
request applies the caller's access policy and the start-up wait before it touches
the upstreams, so a transport cannot forget either. The part holds what only these
requests change: the resource subscribers (uri → the connections that asked for
it), and it notes in the Hub's :class:`~mcp_hub.protocol.apps.RenderedApps` which
server's app a session read. It is built from the parts it uses (access control,
upstream manager, start-up gate, session tracker), none of which a reload replaces.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp import types

from mcp_hub.hub.access import AccessControl, Caller, caller_of_state, remember_caller
from mcp_hub.hub.sessions import SessionTracker
from mcp_hub.hub.startup import StartupGate
from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.apps import RenderedApps, app_session_key, split_ui
from mcp_hub.protocol.log_levels import client_log_level, most_verbose, set_client_log_level

if TYPE_CHECKING:
    from mcp_hub.upstream import ServerConnection, UpstreamManager

__all__ = ["UpstreamServing", "reachable_upstreams"]

logger = logging.getLogger("mcp_hub.hub.core")


def reachable_upstreams(access: AccessControl, upstreams: UpstreamManager, caller: Caller
                        ) -> list[ServerConnection]:
    """The upstream connections ``caller`` may reach (what its capabilities are made of)."""
    policy = access.policy(caller)
    return [c for c in upstreams.connections() if policy.unrestricted or policy.server(c.name)]


class UpstreamServing:
    """Prompts, resources, subscriptions, completion and logging levels (see the module docstring)."""

    def __init__(self, access: AccessControl, upstreams: UpstreamManager, startup: StartupGate,
                 sessions: SessionTracker, rendered_apps: RenderedApps) -> None:
        self._access = access
        self._upstreams = upstreams
        self._startup = startup
        self._sessions = sessions
        self._rendered_apps = rendered_apps
        #: Resource subscriptions: uri -> connections that asked for it (changed only here).
        self.subscribers: dict[str, list[Any]] = {}

    # ------------------------------------------------------------------ prompts
    async def list_prompts(self, caller: Caller) -> list[types.Prompt]:
        await self._startup.wait_lists()
        return self._access.prompts(caller, self._upstreams.list_prompts())

    async def get_prompt(self, caller: Caller, name: str, arguments: dict[str, str] | None,
                         call: CallContext | None) -> types.GetPromptResult:
        await self._startup.wait_lists()
        self._access.check_prompt(caller, name)
        return await self._upstreams.get_prompt(name, arguments, call)

    # ------------------------------------------------------------------ resources
    async def list_resources(self, caller: Caller) -> list[types.Resource]:
        await self._startup.wait_lists()
        return self._access.resources(caller, self._upstreams.list_resources())

    async def list_resource_templates(self, caller: Caller) -> list[types.ResourceTemplate]:
        await self._startup.wait_lists()
        return self._access.templates(caller, self._upstreams.list_resource_templates())

    async def read_resource(self, caller: Caller, uri: str, call: CallContext | None
                            ) -> types.ReadResourceResult:
        await self._startup.wait_lists()
        self._access.check_resource(caller, uri)
        result = await self._upstreams.read_resource(uri, call)
        app = split_ui(uri)
        if app is not None:  # the host is about to render this server's app
            self._rendered_apps.note(app_session_key(call), app[0])
        return result

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        """``resources/subscribe`` for one connection; a closed session stops being a subscriber."""
        await self._startup.wait_lists()
        self._access.check_resource(caller, uri)
        # Updates are filtered again at delivery by the caller remembered here.
        remember_caller(connection, caller)
        subs = self.subscribers.setdefault(uri, [])
        if connection not in subs:
            subs.append(connection)
            stack = getattr(connection, "exit_stack", None)
            if stack is not None:
                # A closed session stops being a subscriber (and stops pinning its memory).
                stack.push_async_callback(self.drop_subscriber, uri, connection)
        await self._upstreams.subscribe_resource(uri)

    async def unsubscribe(self, caller: Caller, uri: str, connection: Any) -> None:
        self._access.check_resource(caller, uri)
        subs = self.subscribers.get(uri, [])
        if connection in subs:
            subs.remove(connection)
        if not subs:
            self.subscribers.pop(uri, None)
            await self._upstreams.unsubscribe_resource(uri)

    async def drop_subscriber(self, uri: str, connection: Any) -> None:
        """``connection`` (a session, or a listen stream) no longer watches ``uri``."""
        subs = self.subscribers.get(uri)
        if subs is None or connection not in subs:
            return
        subs.remove(connection)
        if not subs:
            self.subscribers.pop(uri, None)
            try:
                await self._upstreams.unsubscribe_resource(uri)
            except Exception:
                logger.debug("unsubscribe after a session closed failed", exc_info=True)

    async def resource_updated(self, uri: str) -> None:
        """An upstream's ``notifications/resources/updated``: to the subscribers that may read it."""
        # Checked again at delivery: a reload may have narrowed a subscriber's profile.
        subscribers = [c for c in self.subscribers.get(uri, ())
                       if self._access.may_read(caller_of_state(getattr(c, "state", None)), uri)]
        await self._sessions.resource_updated(uri, subscribers)

    # ------------------------------------------------------------------ completion, logging
    async def complete(
        self, caller: Caller, ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument, context: types.CompletionContext | None,
    ) -> types.Completion:
        await self._startup.wait_lists()
        self._access.check_completion(caller, ref)
        return await self._upstreams.complete(ref, argument, context)

    async def set_log_level(self, connection: Any, level: types.LoggingLevel) -> None:
        """``logging/setLevel`` of one client; upstreams log at the most verbose level asked."""
        set_client_log_level(getattr(connection, "state", None), level)
        levels: list[str] = [level]
        for other in self._sessions.connections():
            chosen = client_log_level(other.state)
            if chosen:
                levels.append(chosen)
        await self._upstreams.set_logging_level(most_verbose(levels))  # type: ignore[arg-type]
