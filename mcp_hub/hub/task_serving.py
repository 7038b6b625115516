"""The Hub's ``tasks/*``: the tasks its clients started, served under the hub's own ids.

:class:`TaskServing` is one of the Hub's parts (the Hub holds it as
``Hub.task_serving``; its serving methods hand ``tasks/get``, ``tasks/result``,
``tasks/cancel``, ``tasks/list`` and the replicas' forwarded requests to it). It is
built from the task book (this process's tasks, :mod:`mcp_hub.hub.tasks`), the task
owners (every replica's, :mod:`mcp_hub.hub.task_owners`), the access control and the
upstream manager, none of which a reload replaces; it holds the forwarder that
carries a request to the replica holding a task (set when a replica bus runs).

An unknown id, another owner's task, another session's and a server the caller may
not use all get the same error (:data:`UNKNOWN_TASK`).
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_hub.hub.access import AccessControl, Caller
from mcp_hub.hub.task_owners import OwnedTask, TaskOwners, owner_digest
from mcp_hub.hub.tasks import TaskBook, TaskForwarder, TaskRecord, ttl_seconds
from mcp_hub.pipeline.context import CallContext

if TYPE_CHECKING:
    from mcp_hub.upstream import UpstreamManager

__all__ = ["RELATED_TASK", "TaskServing", "with_task_id"]

#: The ``_meta`` key that ties a message to a task (2025-11-25 tasks).
RELATED_TASK = "io.modelcontextprotocol/related-task"
#: The one answer for a task id the caller may not use: unknown, expired, another
#: identity's or another session's (nothing tells them apart).
UNKNOWN_TASK = "Unknown task id"
#: Pages of an upstream's ``tasks/list`` read for one downstream ``tasks/list``.
MAX_TASK_PAGES = 20

logger = logging.getLogger("mcp_hub.hub.core")


class TaskServing:
    """The ``tasks/*`` requests of the hub's clients (see the module docstring)."""

    def __init__(self, book: TaskBook, owners: TaskOwners, access: AccessControl,
                 upstreams: UpstreamManager) -> None:
        self._book = book
        self._owners = owners
        self._access = access
        self._upstreams = upstreams
        #: Carries ``tasks/*`` to the replica holding a task (set with a replica bus).
        self.forwarder: TaskForwarder | None = None

    async def created(self, server: str, answer: dict[str, Any], owner: str,
                      listener: Any) -> dict[str, Any]:
        """An upstream answered a call with a task: record it for ``owner`` (here and for
        every replica) and answer with the hub's own task id."""
        created = answer["task"] if isinstance(answer.get("task"), dict) else answer
        upstream_id = str(created.get("taskId"))
        ttl = created.get("ttl", created.get("ttlMs"))
        hub_id = self._book.add(server, upstream_id, owner, ttl, listener)
        await self._owners.record(hub_id, server, upstream_id, owner, ttl_seconds(ttl))
        return with_task_id(answer, upstream_id, hub_id)

    async def _task_of(self, caller: Caller, owner: str, task_id: Any
                       ) -> tuple[OwnedTask, Any]:
        """The owner's task, and its upstream connection when this replica holds it
        (None: another replica does, :attr:`forwarder` carries the request there).
        An unknown id, another owner's task and a server the caller may not use all get
        the same error."""
        found: OwnedTask | None = None
        if isinstance(task_id, str):
            local = self._book.find(task_id, owner)
            found = (OwnedTask(task_id, local.server, local.upstream_id, self._owners.replica)
                     if local is not None else await self._owners.find(task_id, owner))
        policy = self._access.policy(caller)
        if found is None or not (policy.unrestricted or policy.server(found.server)):
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        if found.replica != self._owners.replica:
            if self.forwarder is None:
                raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
            return found, None
        conn = self._upstreams.connection(found.server) if self._book.get(task_id) else None
        if conn is None:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        return found, conn

    async def request(self, caller: Caller, owner: str, method: str,
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
            assert self.forwarder is not None
            answer = await self.forwarder.forward(task, owner_digest(owner), method, body)
        else:
            if listener is not None:
                self._book.listen(hub_id, listener)
            answer = await conn.raw_request(method, body, call)
        return with_task_id(answer, task.upstream_id, hub_id)

    async def serve_for_replica(self, hub_id: str, digest: str, method: str,
                                params: dict[str, Any]) -> dict[str, Any]:
        """A ``tasks/*`` request another replica carried here for a task this one holds;
        ``digest`` (the owner's, :func:`mcp_hub.hub.task_owners.owner_digest`) must match."""
        record = self._book.get(hub_id)
        if record is None or not secrets.compare_digest(
                owner_digest(record.owner).encode(), digest.encode()):
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        conn = self._upstreams.connection(record.server)
        if conn is None:
            raise MCPError(types.INVALID_PARAMS, UNKNOWN_TASK)
        return await conn.raw_request(method, {**params, "taskId": record.upstream_id}, None)

    async def list_owned(self, caller: Caller, owner: str, call: CallContext | None
                         ) -> dict[str, Any]:
        """``tasks/list``: the owner's tasks only, as their upstreams list them now (those
        another replica holds, as that replica's ``tasks/get`` answers)."""
        mine = self._book.owned(owner)
        listed = await self._list_local(mine, call)
        policy = self._access.policy(caller)
        for task in await self._owners.owned(owner):
            if task.hub_id in mine or task.replica == self._owners.replica \
                    or self.forwarder is None \
                    or not (policy.unrestricted or policy.server(task.server)):
                continue
            try:
                got = await self.forwarder.forward(
                    task, owner_digest(owner), "tasks/get", {"taskId": task.upstream_id})
            except MCPError as exc:
                logger.info("tasks/get of a task on another replica failed: %s", exc.message)
                continue
            got.pop("_meta", None)
            listed.append(with_task_id(got, task.upstream_id, task.hub_id))
        return {"tasks": listed}

    async def _list_local(self, mine: dict[str, TaskRecord], call: CallContext | None
                          ) -> list[dict[str, Any]]:
        """The upstreams' ``tasks/list`` pages, kept to the tasks in ``mine``."""
        hub_ids = {(r.server, r.upstream_id): hub_id for hub_id, r in mine.items()}
        listed: list[dict[str, Any]] = []
        for server in sorted({r.server for r in mine.values()}):
            conn = self._upstreams.connection(server)
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

    async def status_changed(self, server: str, params: dict[str, Any]) -> None:
        """An upstream's ``notifications/tasks/status``: to the task's owner, hub id in."""
        upstream_id = params.get("taskId")
        found = self._book.by_upstream(server, upstream_id) if isinstance(upstream_id, str) else None
        if found is None:
            return
        hub_id, _ = found
        conn = self._book.listener(hub_id)
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
