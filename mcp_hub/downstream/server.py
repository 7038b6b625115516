"""The MCP server over the Hub: every request handler of the low-level SDK Server.

One :class:`HubServer` serves one profile (``None`` = everything). All
transports share it: stdio, Streamable HTTP (stateful or stateless) and legacy
SSE. Handlers do as little as possible on the hot path — tools/call builds a
:class:`SessionCallContext` and hands over to :meth:`Hub.call_tool`.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.access import Caller
from mcp_hub.downstream.call_context import LOG_LEVELS, connection_of
from mcp_hub.downstream.input_rounds import install_state_boundary, run_with_rounds
from mcp_hub.downstream.instructions import hub_instructions
from mcp_hub.downstream.visibility import CallerBus, remember_caller
from mcp_hub.hub import Hub

__all__ = ["HubServer", "build_server"]

logger = logging.getLogger(__name__)

Ctx = ServerRequestContext[Any, Any]


class HubServer(Server[Any]):
    """A low-level Server that advertises ``listChanged`` honestly on every transport.

    The Streamable HTTP session manager calls ``create_initialization_options()``
    with no arguments; the default here turns on every list_changed flag because
    the hub really forwards those changes. The ``instructions`` are computed anew each
    time (they name upstream problems; see :mod:`mcp_hub.downstream.instructions`).
    """

    hub: Hub | None = None

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        if self.hub is not None:
            self.instructions = hub_instructions(self.hub)
        if notification_options is None:
            notification_options = NotificationOptions(
                prompts_changed=True, resources_changed=True, tools_changed=True
            )
        return super().create_initialization_options(
            notification_options, experimental_capabilities, extensions
        )


async def _startup(hub: Hub) -> None:
    """Lists wait for the initial upstream connects, never past the start-up deadline."""
    await hub.startup.wait_lists()


def _track(hub: Hub, ctx: Ctx) -> Any:
    conn = connection_of(ctx)
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and hasattr(conn, "exit_stack"):
        hub.sessions.add(conn)
    return conn


def _watch_roots(hub: Hub, ctx: Ctx) -> None:
    """Fetch a handshake-era client's roots (the only era where the hub may ask)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        hub.watch_client_roots(connection_of(ctx))


async def _drop_subscriber(hub: Hub, uri: str, conn: Any) -> None:
    subs = hub.resource_subscribers.get(uri)
    if subs is None or conn not in subs:
        return
    subs.remove(conn)
    if not subs:
        hub.resource_subscribers.pop(uri, None)
        try:
            await hub.upstreams.unsubscribe_resource(uri)
        except Exception:
            logger.debug("unsubscribe after a session closed failed", exc_info=True)


def build_server(hub: Hub, profile: str | None = None) -> HubServer:
    """Build the MCP server that exposes ``hub`` (restricted to ``profile`` if given)."""
    if profile is not None and profile not in hub.config.profiles:
        raise KeyError(f"unknown profile {profile!r}")
    # Every handler below asks hub.access about this caller before it lists or routes.
    caller = Caller(profile=profile)
    access = hub.access

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        _track(hub, ctx)
        await _startup(hub)
        return types.ListToolsResult(tools=hub.list_tools(caller))

    async def call_tool(
        ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        conn = _track(hub, ctx)
        # Hub.call_tool applies the start-up rules (no wait for a registered tool).
        # Over Streamable HTTP, a call whose answer cannot be delivered any more is
        # cancelled (mcp_hub.downstream.resume).
        with hub.open_calls.track(getattr(conn, "session_id", None), ctx.request_id):
            return await run_with_rounds(
                hub.rounds, ctx, params, method="tools/call", target=params.name, hub=hub,
                invoke=lambda call: hub.call_tool(params.name, params.arguments, call,
                                                  profile=caller))
        return types.CallToolResult(
            content=[types.TextContent(text="the client went away; the call was cancelled")],
            is_error=True)

    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        _track(hub, ctx)
        await _startup(hub)
        return types.ListPromptsResult(prompts=access.prompts(caller, hub.upstreams.list_prompts()))

    async def get_prompt(
        ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        await _startup(hub)
        access.check_prompt(caller, params.name)
        return await run_with_rounds(
            hub.rounds, ctx, params, method="prompts/get", target=params.name, hub=hub,
            invoke=lambda call: hub.upstreams.get_prompt(params.name, params.arguments, call))

    async def list_resources(
        ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        _track(hub, ctx)
        await _startup(hub)
        return types.ListResourcesResult(
            resources=access.resources(caller, hub.upstreams.list_resources()))

    async def list_templates(
        ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        await _startup(hub)
        return types.ListResourceTemplatesResult(
            resource_templates=access.templates(caller, hub.upstreams.list_resource_templates())
        )

    async def read_resource(
        ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        await _startup(hub)
        uri = str(params.uri)
        access.check_resource(caller, uri)
        return await run_with_rounds(
            hub.rounds, ctx, params, method="resources/read", target=uri, hub=hub,
            invoke=lambda call: hub.upstreams.read_resource(uri, call))

    async def subscribe(ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        conn = _track(hub, ctx)
        await _startup(hub)
        uri = str(params.uri)
        access.check_resource(caller, uri)
        remember_caller(conn, caller)
        subs = hub.resource_subscribers.setdefault(uri, [])
        if conn not in subs:
            subs.append(conn)
            stack = getattr(conn, "exit_stack", None)
            if stack is not None:
                # A closed session stops being a subscriber (and stops pinning its memory).
                stack.push_async_callback(_drop_subscriber, hub, uri, conn)
        await hub.upstreams.subscribe_resource(uri)
        return types.EmptyResult()

    async def unsubscribe(ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        conn = connection_of(ctx)
        uri = str(params.uri)
        access.check_resource(caller, uri)
        subs = hub.resource_subscribers.get(uri, [])
        if conn in subs:
            subs.remove(conn)
        if not subs:
            hub.resource_subscribers.pop(uri, None)
            await hub.upstreams.unsubscribe_resource(uri)
        return types.EmptyResult()

    async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        await _startup(hub)
        access.check_completion(caller, params.ref)
        completion = await hub.upstreams.complete(params.ref, params.argument, params.context)
        return types.CompleteResult(completion=completion)

    async def set_level(ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        conn = _track(hub, ctx)
        state = getattr(conn, "state", None)
        if isinstance(state, dict):
            state["mcp_hub.log_level"] = params.level
        # Upstreams log at the most verbose level any connected client asked for.
        levels = [params.level]
        for other in hub.sessions.connections():
            lvl = other.state.get("mcp_hub.log_level")
            if lvl:
                levels.append(lvl)
        await hub.upstreams.set_logging_level(min(levels, key=lambda lv: LOG_LEVELS.get(lv, 0)))
        return types.EmptyResult()

    async def initialized(ctx: Ctx, params: types.NotificationParams) -> None:
        _track(hub, ctx)
        _watch_roots(hub, ctx)

    async def roots_changed(ctx: Ctx, params: types.NotificationParams) -> None:
        _watch_roots(hub, ctx)

    server = HubServer(
        hub.config.hub.name if profile is None else f"{hub.config.hub.name}/{profile}",
        version=hub.version,
        instructions=hub_instructions(hub),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_completion=complete,
        on_subscriptions_listen=ListenHandler(CallerBus(hub.sessions.bus, access, caller)),
    )
    server.hub = hub
    # The SDK's OpenTelemetry middleware opens a span per message even with no
    # exporter installed; on a proxy's hot path that is a tenth of the CPU. Off.
    server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    # Registered directly: the constructor keyword warns that logging is deprecated
    # in the 2026-07-28 era, but handshake-era clients still use it.
    # 2026-07-28 input rounds: requestState sealed and verified at the wire boundary.
    install_state_boundary(server, hub.rounds.ttl)
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, initialized
    )
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, roots_changed
    )
    return server
