"""Who owns each task the hub handed out, kept in the state backend so every replica knows.

:class:`mcp_hub.hub.tasks.TaskBook` is this process's book: the upstream's id, the
owner, the connection told of status changes. A client that reconnects, or
whose next request lands on another replica behind a load balancer, must still
reach its task; the upstream's task lives in the upstream session of the
replica that started it (an upstream such as ``server-everything`` keeps tasks
per session, and a stdio upstream is a process of that replica). So each task
is also written to the state backend (:mod:`mcp_hub.state`: embedded for one
hub, Redis for replicas) as a :class:`OwnedTask`: the server, the upstream's
id, a digest of the owner and the **replica** that holds the upstream session.
A replica that does not hold the task carries ``tasks/*`` to that replica
(:mod:`mcp_hub.downstream.replicas.task_relay`).

The owner is stored only as a SHA-256 digest (an owner names a downstream
session id for callers without an identity) and compared in constant time; a
lookup by anyone else gets ``None``, like an id that never existed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass

from mcp_hub.state import StateBackend, StateUnavailable

__all__ = ["OwnedTask", "TaskOwners", "owner_digest"]

logger = logging.getLogger("mcp_hub.hub.core")

_TASK_KEY = "task:"
_OWNER_KEY = "task-owner:"


def owner_digest(owner: str) -> str:
    """The stored form of an owner (hex SHA-256)."""
    return hashlib.sha256(owner.encode()).hexdigest()


@dataclass(frozen=True)
class OwnedTask:
    """A task as every replica can look it up."""

    hub_id: str
    server: str
    upstream_id: str
    replica: str


class TaskOwners:
    """Hub task id → :class:`OwnedTask` in the state backend, looked up with the owner."""

    def __init__(self, state: StateBackend) -> None:
        self.state = state
        #: This process's name in the records; the replica bus names it the same
        #: (:func:`mcp_hub.downstream.replicas.task_relay.relay_tasks`).
        self.replica = os.urandom(6).hex()

    async def record(self, hub_id: str, server: str, upstream_id: str, owner: str,
                     ttl: float) -> None:
        """Write the task's owner; a store that is down leaves the task to this replica."""
        digest = owner_digest(owner)
        value = json.dumps({"s": server, "u": upstream_id, "o": digest, "r": self.replica},
                           separators=(",", ":")).encode()
        try:
            await self.state.put(_TASK_KEY + hub_id, value, ttl)
            await self.state.set_add(_OWNER_KEY + digest, hub_id, ttl)
        except StateUnavailable:
            logger.warning("task %s is known to this replica only: the state store is "
                           "unavailable", hub_id.partition("/")[0])

    async def find(self, hub_id: str, owner: str) -> OwnedTask | None:
        """The task when ``owner`` owns it and it has not expired; else None."""
        try:
            raw = await self.state.get(_TASK_KEY + hub_id)
        except StateUnavailable:
            return None
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            stored, server, upstream_id, replica = (str(data["o"]), str(data["s"]),
                                                    str(data["u"]), str(data["r"]))
        except (ValueError, KeyError, TypeError):
            return None
        if not secrets.compare_digest(stored.encode(), owner_digest(owner).encode()):
            return None
        return OwnedTask(hub_id, server, upstream_id, replica)

    async def owned(self, owner: str) -> list[OwnedTask]:
        """Every live task of ``owner``, wherever it was started."""
        try:
            ids = await self.state.set_members(_OWNER_KEY + owner_digest(owner))
        except StateUnavailable:
            return []
        found = [await self.find(hub_id, owner) for hub_id in sorted(ids)]
        return [task for task in found if task is not None]
