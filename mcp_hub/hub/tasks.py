"""Task ids the hub hands out for its upstreams' tasks (2025-11-25 tasks), and whose they are.

A task-augmented ``tools/call`` is answered by the upstream with a task whose id
is the upstream's own. Every client of the hub shares one upstream session, so
that id says neither which upstream owns the task nor which client started it.
The hub therefore hands out its own id, ``<server>/<random>``: the server name
says where ``tasks/get``, ``tasks/result``, ``tasks/cancel`` and status
notifications go; the random part (128 bits) is the key of a :class:`TaskRecord`
holding the upstream's id and the **owner**: the caller's identity when it has
one (its tasks then outlive its session: a client that reconnects keeps them),
else its downstream session. Every lookup names the owner: another identity or,
without one, another session gets ``None``, exactly as for an id that never
existed, so ids cannot be probed across clients.

Who owns a task is also written to the state backend
(:mod:`mcp_hub.hub.task_owners`), so a client that reconnects, or reaches another
replica, finds it; the book stays the replica's own (the upstream's id, the
connection told of status changes).

The 2026-07-28 extension (:data:`TASKS_EXTENSION`) goes the same way: its flat
``CreateTaskResult`` gets the hub's id, and ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` are routed by it.

The book is bounded (:data:`MAX_TASKS`, oldest dropped first) and records
expire with the task's ``ttl`` as the upstream granted it (or
:data:`DEFAULT_TTL_SECONDS`).
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcp_hub.hub.task_owners import OwnedTask

__all__ = ["DEFAULT_TTL_SECONDS", "MAX_TASKS", "TASKS_EXTENSION", "TaskBook", "TaskForwarder",
           "TaskRecord", "declares_tasks", "ttl_seconds"]

#: The 2026-07-28 tasks extension: the server decides whether a ``tools/call`` becomes a
#: task (a flat ``CreateTaskResult``, ``resultType: "task"``) for a client that declares
#: it; ``tasks/get`` inlines the result, ``tasks/update`` carries ``inputResponses``.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

#: Tasks remembered at once; past it the oldest are forgotten.
MAX_TASKS = 10_000
#: How long a task is remembered when the upstream names no ``ttl``.
DEFAULT_TTL_SECONDS = 3600.0


def declares_tasks(params: Any) -> bool:
    """Whether a 2026-07-28 request's ``_meta`` declares the tasks extension."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    caps = meta.get(_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def ttl_seconds(ttl_ms: Any) -> float:
    """How long a task is remembered: the upstream's ``ttl`` (ms), else the default."""
    return ttl_ms / 1000 if isinstance(ttl_ms, int | float) and ttl_ms > 0 else (
        DEFAULT_TTL_SECONDS)


class TaskForwarder(Protocol):
    """Carries a ``tasks/*`` request to the replica that holds the task."""

    async def forward(self, task: OwnedTask, digest: str, method: str,
                      params: dict[str, Any]) -> dict[str, Any]:
        """That replica's answer (the upstream's, upstream ids in); raises MCPError."""
        ...


@dataclass(frozen=True)
class TaskRecord:
    """One upstream task as the hub knows it."""

    server: str
    upstream_id: str
    owner: str
    expires: float


class TaskBook:
    """Hub task id → :class:`TaskRecord`, looked up only together with the owner."""

    def __init__(self, max_tasks: int = MAX_TASKS) -> None:
        self.max_tasks = max_tasks
        self._tasks: OrderedDict[str, TaskRecord] = OrderedDict()
        self._by_upstream: dict[tuple[str, str], str] = {}
        #: hub id → the downstream connection told of the task's status changes.
        self._listeners: dict[str, Any] = {}

    def add(self, server: str, upstream_id: str, owner: str, ttl_ms: Any = None,
            listener: Any = None) -> str:
        """Remember a new upstream task for ``owner``; return the hub's id for it.
        ``listener`` (the owner's connection) receives the task's status notifications."""
        self._expire()
        seconds = ttl_seconds(ttl_ms)
        hub_id = f"{server}/{secrets.token_urlsafe(16)}"
        self._tasks[hub_id] = TaskRecord(server, upstream_id, owner,
                                         time.monotonic() + seconds)
        self._by_upstream[(server, upstream_id)] = hub_id
        if listener is not None:
            self._listeners[hub_id] = listener
        while len(self._tasks) > self.max_tasks:
            self._forget(next(iter(self._tasks)))
        return hub_id

    def find(self, hub_id: str, owner: str) -> TaskRecord | None:
        """The task ``hub_id`` when ``owner`` owns it and it has not expired; else None."""
        record = self._tasks.get(hub_id)
        if record is None or not secrets.compare_digest(record.owner.encode(), owner.encode()):
            return None
        if record.expires < time.monotonic():
            self._forget(hub_id)
            return None
        return record

    def get(self, hub_id: str) -> TaskRecord | None:
        """The live task ``hub_id`` whoever owns it: only for a caller that checked the
        owner already (another replica's request, :mod:`mcp_hub.hub.task_owners`)."""
        record = self._tasks.get(hub_id)
        if record is not None and record.expires < time.monotonic():
            self._forget(hub_id)
            return None
        return record

    def listen(self, hub_id: str, listener: Any) -> None:
        """From now on ``listener`` (the owner's current connection) gets the status changes."""
        if hub_id in self._tasks:
            self._listeners[hub_id] = listener

    def owned(self, owner: str) -> dict[str, TaskRecord]:
        """Every live task of ``owner``, by hub id (oldest first)."""
        self._expire()
        return {hub_id: r for hub_id, r in self._tasks.items() if r.owner == owner}

    def by_upstream(self, server: str, upstream_id: str) -> tuple[str, TaskRecord] | None:
        """The hub's id and record of an upstream's task (for its status notifications)."""
        hub_id = self._by_upstream.get((server, upstream_id))
        record = self._tasks.get(hub_id) if hub_id is not None else None
        return (hub_id, record) if hub_id is not None and record is not None else None

    def listener(self, hub_id: str) -> Any:
        """The connection told of ``hub_id``'s status changes, if any."""
        return self._listeners.get(hub_id)

    def __len__(self) -> int:
        return len(self._tasks)

    def _forget(self, hub_id: str) -> None:
        record = self._tasks.pop(hub_id, None)
        self._listeners.pop(hub_id, None)
        if record is not None:
            self._by_upstream.pop((record.server, record.upstream_id), None)

    def _expire(self) -> None:
        now = time.monotonic()
        for hub_id in [h for h, r in self._tasks.items() if r.expires < now]:
            self._forget(hub_id)
