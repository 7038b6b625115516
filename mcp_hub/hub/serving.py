"""The Hub's door for the serving side: list, call, read, subscribe, complete, status.

The transports (:mod:`mcp_hub.downstream`) reach the hub only through these
methods (and :meth:`Hub.call_tool`, :meth:`Hub.list_tools`, :meth:`Hub.status`).
Each one applies the caller's access policy and the start-up wait before it
touches the upstreams, so a transport cannot forget either. The Hub mixes this
class in; it owns the attributes declared here.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_hub.config.model import HubConfig
from mcp_hub.hub.access import AccessControl, Caller, OpsView, remember_caller
from mcp_hub.hub.list_freshness import ListHintValue, list_hint
from mcp_hub.hub.metrics import Metrics
from mcp_hub.hub.sessions import SessionTracker
from mcp_hub.hub.startup import StartupGate
from mcp_hub.hub.task_owners import OwnedTask, TaskOwners, owner_digest
from mcp_hub.hub.tasks import TaskBook, TaskForwarder, TaskRecord
from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.apps import RenderedApps, app_session_key, split_ui
from mcp_hub.protocol.log_levels import client_log_level, most_verbose, set_client_log_level
from mcp_hub.registry.tool_registry import ToolRegistry

if TYPE_CHECKING:
    from mcp_hub.upstream import ServerConnection, UpstreamManager, UpstreamStatus
    from mcp_hub.upstream.peruser import PerUserServers
    from mcp_hub.upstream.peruser.service import ConnectAnswer

__all__ = ["RELATED_TASK", "ServingMixin", "with_task_id"]

#: The ``_meta`` key that ties a message to a task (2025-11-25 tasks).
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: The one answer for a task id the caller may not use: unknown, expired, another
#: identity's or another session's (nothing tells them apart).
UNKNOWN_TASK = "Unknown task id"
#: Pages of an upstream's ``tasks/list`` read for one downstream ``tasks/list``.
MAX_TASK_PAGES = 20

logger = logging.getLogger("mcp_hub.hub.core")


class ServingMixin:
    """What a transport may ask of the Hub besides tools (see the module docstring)."""

    config: HubConfig
    registry: ToolRegistry
    access: AccessControl
    upstreams: UpstreamManager
    per_user: PerUserServers
    startup: StartupGate
    sessions: SessionTracker
    metrics: Metrics
    #: The upstreams' tasks the hub's clients started (mcp_hub.hub.tasks).
    tasks: TaskBook
    #: Who owns each task, for every replica (mcp_hub.hub.task_owners).
    task_owners: TaskOwners
    #: Carries ``tasks/*`` to the replica holding a task (set with a replica bus).
    task_forwarder: TaskForwarder | None
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

    def upstreams_for(self, caller: Caller) -> list[ServerConnection]:
        """The upstream connections ``caller`` may reach (what its capabilities are made of)."""
        policy = self.access.policy(caller)
        return [c for c in self.upstreams.connections()
                if policy.unrestricted or policy.server(c.name)]

    async def open_connect_link(self, name: str, ticket: str, base: str,
                                signed_in: str | None) -> ConnectAnswer:
        """``GET /connect/NAME``: begin a per-user server's sign-in (mcp_hub/upstream/peruser/)."""
        return await self.per_user.open_link(name, ticket, base, signed_in)

    async def finish_connect(self, query: dict[str, str], browser: str | None) -> ConnectAnswer:
        """``GET /connect/callback``: the authorization server's redirect back."""
        return await self.per_user.finish(query, browser)

    # ------------------------------------------------------------------ list freshness
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

    # ------------------------------------------------------------------ tasks
    async def _task_of(self, caller: Caller, owner: str, task_id: Any
                       ) -> tuple[OwnedTask, Any]:
        """The owner's task, and its upstream connection when this replica holds it
        (None: another replica does, :attr:`task_forwarder` carries the request there).
        An unknown id, another owner's task and a server the caller may not use all get
        the same error."""
        found: OwnedTask | None = None
        if isinstance(task_id, str):
            local = self.tasks.find(task_id, owner)
            found = (OwnedTask(task_id, local.server, local.upstream_id, self.task_owners.replica)
                     if local is not None else await self.task_owners.find(task_id, owner))
        policy = self.access.policy(caller)
        if found is None or not (policy.unrestricted or policy.server(found.server)):
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        if found.replica != self.task_owners.replica:
            if self.task_forwarder is None:
                raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
            return found, None
        conn = self.upstreams.connection(found.server) if self.tasks.get(task_id) else None
        if conn is None:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        return found, conn

    async def task_request(self, caller: Caller, owner: str, method: str,
                           params: dict[str, Any], call: CallContext | None,
                           listener: Any = None) -> dict[str, Any]:
        """``tasks/get``, ``tasks/result`` or ``tasks/cancel`` for the owner's task, sent
        to the upstream that runs it with the upstream's own id (through the replica
        holding it when that is another); ids in the answer become the hub's again.
        ``listener``, the asking connection, gets the task's status changes from now on
        (a client that reconnected)."""
        hub_id = str(params.get("taskId"))
        task, conn = await self._task_of(caller, owner, params.get("taskId"))
        body = {**params, "taskId": task.upstream_id}
        if conn is None:
            assert self.task_forwarder is not None
            answer = await self.task_forwarder.forward(task, owner_digest(owner), method, body)
        else:
            if listener is not None:
                self.tasks.listen(hub_id, listener)
            answer = await conn.raw_request(method, body, call)
        return with_task_id(answer, task.upstream_id, hub_id)

    async def serve_task_for_replica(self, hub_id: str, digest: str, method: str,
                                     params: dict[str, Any]) -> dict[str, Any]:
        """A ``tasks/*`` request another replica carried here for a task this one holds;
        ``digest`` (the owner's, :func:`mcp_hub.hub.task_owners.owner_digest`) must match."""
        record = self.tasks.get(hub_id)
        if record is None or not secrets.compare_digest(
                owner_digest(record.owner).encode(), digest.encode()):
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        conn = self.upstreams.connection(record.server)
        if conn is None:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        return await conn.raw_request(method, {**params, "taskId": record.upstream_id}, None)

    async def list_tasks(self, caller: Caller, owner: str, call: CallContext | None
                         ) -> dict[str, Any]:
        """``tasks/list``: the owner's tasks only, as their upstreams list them now (those
        another replica holds, as that replica's ``tasks/get`` answers)."""
        mine = self.tasks.owned(owner)
        listed = await self._list_local_tasks(mine, call)
        policy = self.access.policy(caller)
        for task in await self.task_owners.owned(owner):
            if task.hub_id in mine or task.replica == self.task_owners.replica \
                    or self.task_forwarder is None \
                    or not (policy.unrestricted or policy.server(task.server)):
                continue
            try:
                got = await self.task_forwarder.forward(
                    task, owner_digest(owner), "tasks/get", {"taskId": task.upstream_id})
            except MCPError as exc:
                logger.info("tasks/get of a task on another replica failed: %s", exc.message)
                continue
            got.pop("_meta", None)
            listed.append(with_task_id(got, task.upstream_id, task.hub_id))
        return {"tasks": listed}

    async def _list_local_tasks(self, mine: dict[str, TaskRecord], call: CallContext | None
                                ) -> list[dict[str, Any]]:
        """The upstreams' ``tasks/list`` pages, kept to the tasks in ``mine``."""
        hub_ids = {(r.server, r.upstream_id): hub_id for hub_id, r in mine.items()}
        listed: list[dict[str, Any]] = []
        for server in sorted({r.server for r in mine.values()}):
            conn = self.upstreams.connection(server)
            if conn is None:
                continue
            cursor: Any = None
            for _ in range(MAX_TASK_PAGES):
                try:
                    page = await conn.raw_request(
                        "tasks/list", {} if cursor is None else {"cursor": cursor}, call)
                except MCPError as exc:
                    logger.info("tasks/list at %s failed: %s", server, exc.message)
                    break
                for task in page.get("tasks") or ():
                    hub_id = hub_ids.get((server, task.get("taskId")))
                    if hub_id is not None:
                        listed.append({**task, "taskId": hub_id})
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        return listed

    async def task_status(self, server: str, params: dict[str, Any]) -> None:
        """An upstream's ``notifications/tasks/status``: to the task's owner, hub id in."""
        upstream_id = params.get("taskId")
        found = self.tasks.by_upstream(server, upstream_id) if isinstance(upstream_id, str) else None
        if found is None:
            return
        hub_id, _ = found
        conn = self.tasks.listener(hub_id)
        if conn is None:
            return
        try:
            await conn.notify("notifications/tasks/status", {**params, "taskId": hub_id})
        except Exception:
            logger.debug("task status to a closed session dropped", exc_info=True)


def with_task_id(answer: dict[str, Any], upstream_id: str, hub_id: str) -> dict[str, Any]:
    """``answer`` with the upstream's task id replaced by the hub's: the ``taskId``
    field, a ``task`` object's, and the related-task ``_meta`` entry."""
    out = dict(answer)
    if out.get("taskId") == upstream_id:
        out["taskId"] = hub_id
    task = out.get("task")
    if isinstance(task, dict) and task.get("taskId") == upstream_id:
        out["task"] = {**task, "taskId": hub_id}
    meta = out.get("_meta")
    related = meta.get(RELATED_TASK) if isinstance(meta, dict) else None
    if isinstance(meta, dict) and isinstance(related, dict) and related.get("taskId") == upstream_id:
        out["_meta"] = {**meta, RELATED_TASK: {**related, "taskId": hub_id}}
    return out
