"""The MCP server over the Hub: every request handler of the low-level SDK Server.

One :class:`HubServer` serves one profile (``None`` = everything). All
transports share it: stdio, Streamable HTTP (stateful or stateless) and legacy
SSE. Handlers do as little as possible on the hot path — tools/call builds a
:class:`SessionCallContext` and hands over to :meth:`Hub.call_tool`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp import types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.compat.sdk_modules import SdkOtelMiddleware
from mcp_hub.downstream.call_context import SessionCallContext, connection_of
from mcp_hub.downstream.capabilities import (
    DiscoverAfterStartup,
    merge_upstreams,
    upstream_extensions,
    upstream_features,
)
from mcp_hub.downstream.extension_audit import ExtensionAudit
from mcp_hub.downstream.identity import caller_for
from mcp_hub.downstream.input_rounds import install_state_boundary, run_with_rounds
from mcp_hub.downstream.instructions import hub_instructions
from mcp_hub.downstream.replicas.sessions import remember_level, remember_subscription
from mcp_hub.downstream.task_methods import TaskMethods, TaskUpdateParams
from mcp_hub.downstream.visibility import CallerListen, ToolsDigest, uses_server
from mcp_hub.hub.access import Caller, remember_caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.hub.list_freshness import hint_fields
from mcp_hub.hub.tasks import declares_tasks
from mcp_hub.telemetry.middleware import RequestSpans

__all__ = ["HubServer", "build_server"]

Ctx = ServerRequestContext[Any, Any]

#: 2025-11-25 task methods the 2026-07-28 tasks extension removed: unknown methods there.
REMOVED_IN_MODERN = frozenset({"tasks/result", "tasks/list"})


def _refuse_removed(ctx: Ctx) -> None:
    """-32601 for a method the request's era does not have (``REMOVED_IN_MODERN``)."""
    if ctx.method in REMOVED_IN_MODERN and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(types.METHOD_NOT_FOUND, "Method not found")


class HubServer(Server[Any]):
    """A low-level Server that advertises ``listChanged`` honestly on every transport.

    The Streamable HTTP session manager calls ``create_initialization_options()``
    with no arguments; the default here turns on every list_changed flag because
    the hub really forwards those changes. The ``instructions`` are computed anew each
    time (they name upstream problems; see :mod:`mcp_hub.downstream.instructions`).
    """

    hub: ServingHub | None = None
    #: The endpoint's caller (its profile): capabilities follow the upstreams it may use.
    endpoint: Caller = Caller()

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

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        # initialize and server/discover alike: the hub's own, merged with its upstreams'.
        own = super().get_capabilities(notification_options, experimental_capabilities,
                                       extensions, protocol_version=protocol_version)
        if self.hub is None:
            return own
        self.instructions = hub_instructions(self.hub)  # discover reads them after this
        usable = self.hub.upstreams_for(self.endpoint)
        return merge_upstreams(own, upstream_features(usable), upstream_extensions(usable))


def _track(hub: ServingHub, ctx: Ctx, caller: Caller | None = None) -> Any:
    conn = connection_of(ctx)
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and hasattr(conn, "exit_stack"):
        if caller is not None:
            remember_caller(conn, caller)  # list_changed goes only where the visible tools changed
        hub.track_session(conn)
    return conn


class _Handlers:
    """The request handlers of one served profile; each asks the Hub (``ServingHub``), nothing below it."""

    def __init__(self, hub: ServingHub, caller: Caller) -> None:
        self.hub = hub
        self.caller = caller

    def who(self, ctx: Ctx) -> Caller:
        """The endpoint's caller, with the signed-in identity of the request over HTTP."""
        return caller_for(ctx, self.caller)

    async def list_tools(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        _track(self.hub, ctx, self.who(ctx))
        await self.hub.wait_lists()
        return types.ListToolsResult(tools=self.hub.list_tools(self.who(ctx)),
                                     **hint_fields(self.hub.list_hint("tools", self.who(ctx))))

    async def call_tool(
        self, ctx: Ctx, params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        hub = self.hub
        conn = _track(hub, ctx, self.who(ctx))
        # Hub.call_tool applies the start-up rules (no wait for a registered tool).
        # Over Streamable HTTP, a call whose answer cannot be delivered any more is
        # cancelled (mcp_hub.downstream.http.resume). A 2026-07-28 client's call may span
        # input rounds (mcp_hub.downstream.input_rounds).
        with hub.open_calls.track(getattr(conn, "session_id", None), ctx.request_id):
            return await run_with_rounds(
                hub.rounds, ctx, params, method="tools/call", target=params.name, hub=hub,
                invoke=lambda call: hub.call_tool(params.name, params.arguments, call,
                                                  profile=self.who(ctx)))
        return types.CallToolResult(
            content=[types.TextContent(text="the client went away; the call was cancelled")],
            is_error=True)

    def task_owner(self, ctx: Ctx) -> tuple[str, Any]:
        """Who owns a task started by this request: the caller's identity when it has
        one (its tasks outlive the session: mcp_hub.hub.tasks), else its downstream session
        (its HTTP session id, else the connection; a sessionless 2026-07-28 request: the
        endpoint); and the connection told of the task's status changes."""
        conn = connection_of(ctx)
        who = self.who(ctx)
        if who.identity:
            return f"identity:{who.identity}", conn
        session = getattr(conn, "session_id", None)
        if session is None and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            # A 2026-07-28 request without a session or an identity: nothing but the
            # endpoint names the caller; the hub's random task id is the key.
            return f"endpoint:{who.profile or ''}", conn
        return f"session:{session or f'connection:{id(conn)}'}", conn

    async def call_task(self, ctx: Ctx) -> dict[str, Any]:
        """A task-augmented ``tools/call``: the pipeline as for any call, the upstream's
        task under the hub's own id (mcp_hub.hub.tasks)."""
        params = types.CallToolRequestParams.model_validate(ctx.params or {}, by_name=False)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # 2026-07-28 extension: the upstream decides (a legacy ``task`` is not passed on).
        task = None if modern or params.task is None else params.task.model_dump(
            by_alias=True, exclude_none=True)
        hub = self.hub
        conn = _track(hub, ctx, self.who(ctx))
        owner, listener = self.task_owner(ctx)
        call = SessionCallContext(ctx, params.name, hub)
        with hub.open_calls.track(getattr(conn, "session_id", None), ctx.request_id):
            if modern:  # the upstream may ask its questions first (input rounds)
                answer = await run_with_rounds(
                    hub.rounds, ctx, params, method="tools/call", target=params.name, hub=hub,
                    invoke=lambda round_call: hub.call_tool_task(
                        params.name, params.arguments, None, round_call, profile=self.who(ctx),
                        owner=owner, listener=listener))
            else:
                answer = await hub.call_tool_task(
                    params.name, params.arguments, task, call, profile=self.who(ctx),
                    owner=owner, listener=listener)
        if isinstance(answer, dict):
            return answer
        plain = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        if modern:
            plain.setdefault("resultType", "complete")
        return plain

    async def task_request(self, ctx: Ctx, params: types.RequestParams) -> dict[str, Any]:
        """``tasks/get``, ``tasks/result``, ``tasks/cancel``, ``tasks/update``: routed to
        the task's upstream."""
        _refuse_removed(ctx)
        owner, conn = self.task_owner(ctx)
        body = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        body.pop("_meta", None)
        call = SessionCallContext(ctx, ctx.method, self.hub)
        return await self.hub.task_request(self.who(ctx), owner, ctx.method, body, call,
                                           listener=conn)

    async def list_tasks(self, ctx: Ctx, params: types.PaginatedRequestParams) -> dict[str, Any]:
        """``tasks/list``: this caller's tasks in this session, over every upstream."""
        _refuse_removed(ctx)
        owner, _ = self.task_owner(ctx)
        return await self.hub.list_tasks(self.who(ctx), owner, SessionCallContext(ctx, ctx.method,
                                                                                  self.hub))

    async def list_skills(self, ctx: Ctx, params: types.PaginatedRequestParams) -> dict[str, Any]:
        """``skills/list`` (Agent Skills): every usable upstream's skills, one page."""
        _track(self.hub, ctx, self.who(ctx))
        return await self.hub.list_skills(self.who(ctx), SessionCallContext(ctx, ctx.method, self.hub))

    async def get_skill(self, ctx: Ctx, params: SkillUriParams) -> dict[str, Any]:
        """``skills/get``: routed like a ``resources/read`` of the same URI."""
        return await self.hub.get_skill(self.who(ctx), params.uri,
                                        SessionCallContext(ctx, ctx.method, self.hub))

    async def read_directory(self, ctx: Ctx, params: SkillUriParams) -> dict[str, Any]:
        """``resources/directory/read``: routed like a ``resources/read`` of the same URI."""
        return await self.hub.read_directory(self.who(ctx), params.uri, params.cursor,
                                             SessionCallContext(ctx, ctx.method, self.hub))

    async def list_prompts(self, ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        _track(self.hub, ctx, self.who(ctx))
        return types.ListPromptsResult(prompts=await self.hub.list_prompts(self.who(ctx)),
                                       **hint_fields(self.hub.list_hint("prompts", self.who(ctx))))

    async def get_prompt(
        self, ctx: Ctx, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        return await run_with_rounds(
            self.hub.rounds, ctx, params, method="prompts/get", target=params.name, hub=self.hub,
            invoke=lambda call: self.hub.get_prompt(self.who(ctx), params.name, params.arguments,
                                                    call))

    async def list_resources(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        _track(self.hub, ctx, self.who(ctx))
        return types.ListResourcesResult(resources=await self.hub.list_resources(self.who(ctx)),
                                         **hint_fields(self.hub.list_hint("resources", self.who(ctx))))

    async def list_templates(
        self, ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=await self.hub.list_resource_templates(self.who(ctx)),
            **hint_fields(self.hub.list_hint("templates", self.who(ctx))))

    async def read_resource(
        self, ctx: Ctx, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        uri = str(params.uri)
        return await run_with_rounds(
            self.hub.rounds, ctx, params, method="resources/read", target=uri, hub=self.hub,
            invoke=lambda call: self.hub.read_resource(self.who(ctx), uri, call))

    async def subscribe(self, ctx: Ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
        conn = _track(self.hub, ctx, self.who(ctx))
        await self.hub.subscribe(self.who(ctx), str(params.uri), conn)
        await remember_subscription(self.hub.state, getattr(conn, "session_id", None),
                                    str(params.uri), True)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        conn = connection_of(ctx)
        await self.hub.unsubscribe(self.who(ctx), str(params.uri), conn)
        await remember_subscription(self.hub.state, getattr(conn, "session_id", None),
                                    str(params.uri), False)
        return types.EmptyResult()

    async def complete(self, ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        completion = await self.hub.complete(self.who(ctx), params.ref, params.argument, params.context)
        return types.CompleteResult(completion=completion)

    async def set_level(self, ctx: Ctx, params: types.SetLevelRequestParams) -> types.EmptyResult:
        conn = _track(self.hub, ctx, self.who(ctx))
        await self.hub.set_log_level(conn, params.level)
        await remember_level(self.hub.state, getattr(conn, "session_id", None), params.level)
        return types.EmptyResult()

    async def initialized(self, ctx: Ctx, params: types.NotificationParams) -> None:
        _track(self.hub, ctx, self.who(ctx))
        self.roots_changed_now(ctx)

    async def roots_changed(self, ctx: Ctx, params: types.NotificationParams) -> None:
        self.roots_changed_now(ctx)

    def roots_changed_now(self, ctx: Ctx) -> None:
        """Fetch a handshake-era client's roots (the only era where the hub may ask)."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.hub.watch_client_roots(connection_of(ctx))


class SkillUriParams(types.RequestParams):
    """The params of ``skills/get`` and ``resources/directory/read`` (Agent Skills)."""

    uri: str
    cursor: str | None = None


class TaskCalls:
    """Server middleware: a ``tools/call`` that may become a task goes to ``call_task``:
    a handshake-era one with a ``task``, a 2026-07-28 one whose client declares the
    tasks extension (mcp_hub.downstream.task_methods)."""

    def __init__(self, call_task: Callable[[Ctx], Awaitable[dict[str, Any]]]) -> None:
        self.call_task = call_task

    async def __call__(self, ctx: Ctx, call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping) and (
                declares_tasks(dict(params)) if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
                else params.get("task") is not None):
            return await self.call_task(ctx)
        return await call_next(ctx)


def build_server(hub: ServingHub, profile: str | None = None) -> HubServer:
    """Build the MCP server that exposes ``hub`` (restricted to ``profile`` if given)."""
    if profile is not None and profile not in hub.config.profiles:
        raise KeyError(f"unknown profile {profile!r}")
    # Every handler asks the Hub, which applies hub.access to this caller before it
    # lists or routes.
    # Over HTTP with sign-in, each handler adds the request's identity (caller_for).
    caller = Caller(profile=profile)
    h = _Handlers(hub, caller)
    digest = ToolsDigest(hub)
    hub.sessions.visible = digest.of_connection
    hub.sessions.prepare_visible = digest.prepare
    hub.sessions.uses_server = uses_server(hub.access)
    server = HubServer(
        hub.config.hub.name if profile is None else f"{hub.config.hub.name}/{profile}",
        version=hub.version,
        instructions=hub_instructions(hub),
        on_list_tools=h.list_tools,
        on_call_tool=h.call_tool,
        on_list_prompts=h.list_prompts,
        on_get_prompt=h.get_prompt,
        on_list_resources=h.list_resources,
        on_list_resource_templates=h.list_templates,
        on_read_resource=h.read_resource,
        on_subscribe_resource=h.subscribe,
        on_unsubscribe_resource=h.unsubscribe,
        on_completion=h.complete,
        on_subscriptions_listen=CallerListen(hub.sessions.bus, hub.access, digest, caller, hub),
    )
    server.hub = hub
    server.endpoint = caller
    # The SDK's OpenTelemetry middleware opens a span per message even with no
    # exporter installed; on a proxy's hot path that is a tenth of the CPU. Off.
    if SdkOtelMiddleware is not None:
        server.middleware = [m for m in server.middleware if not isinstance(m, SdkOtelMiddleware)]
    server.middleware.append(RequestSpans(hub))  # the hub's own, cheap spans (mcp_hub.telemetry)
    server.middleware.append(ExtensionAudit(hub, caller))  # tasks, app and skill reads, skills
    # Registered directly: the constructor keyword warns that logging is deprecated
    # in the 2026-07-28 era, but handshake-era clients still use it.
    # 2026-07-28 input rounds: requestState sealed and verified at the wire boundary.
    install_state_boundary(server, hub.rounds.ttl, hub.config.hub.http.session_secret)
    server.middleware.append(DiscoverAfterStartup(hub.wait_lists))
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, h.set_level)
    # 2025-11-25 tasks (mcp_hub.hub.tasks): a task-augmented tools/call is answered before the
    # SDK's tools/call result check, which knows no CreateTaskResult.
    server.middleware.append(TaskMethods())
    server.middleware.append(TaskCalls(h.call_task))
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, h.task_request)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, h.task_request)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, h.task_request)
    server.add_request_handler("tasks/update", TaskUpdateParams, h.task_request)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, h.list_tasks)
    # Agent Skills (mcp_hub.protocol.skills): routed to the upstreams that declare the extension.
    server.add_request_handler("skills/list", types.PaginatedRequestParams, h.list_skills)
    server.add_request_handler("skills/get", SkillUriParams, h.get_skill)
    server.add_request_handler("resources/directory/read", SkillUriParams, h.read_directory)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, h.initialized)
    server.add_notification_handler(
        "notifications/roots/list_changed", types.NotificationParams, h.roots_changed
    )
    return server
