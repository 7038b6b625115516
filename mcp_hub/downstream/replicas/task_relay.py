"""``tasks/*`` carried to the replica that holds the task (:mod:`mcp_hub.hub.task_owners`).

An upstream's task lives in the upstream session of the replica whose client
started it. Behind a round-robin load balancer the client's ``tasks/get``,
``tasks/result``, ``tasks/cancel`` or ``tasks/list`` may land on any replica,
and a client that reconnects may too. The replica the request reaches looks
the task up in the state backend (owner checked there), then:

1. publishes the request on the replica bus (``task``): the hub's id, the
   owner's digest, the method and its parameters (the upstream's id in);
2. the holding replica checks the digest against its own book, sends the
   request to its upstream session, says it is alive (``task-alive``) every few
   seconds while the upstream works (``tasks/result`` waits for the task's end)
   and publishes the answer (``task-reply``);
3. the first replica answers its client. A client that goes away sends
   ``task-cancel``; the holder stops waiting for the upstream.

A holder that never answers (its replica is gone, and the upstream session with
it) is given up after a few silent seconds with the unknown-task error. The
carrying itself is :mod:`mcp_hub.downstream.replicas.carried`, shared with input rounds.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_hub.downstream.replicas.bus import ReplicaBus
from mcp_hub.downstream.replicas.carried import Carrier, error_reply
from mcp_hub.hub.interface import ServingHub
from mcp_hub.hub.task_owners import OwnedTask

__all__ = ["TaskRelay", "relay_tasks"]

logger = logging.getLogger("mcp_hub.hub.core")

#: The answer when the holder is silent: the same as for an unknown id.
UNKNOWN_TASK = "Unknown task id"


class TaskRelay(Carrier):
    """Carries ``tasks/*`` to the holding replica, and serves those carried here."""

    def __init__(self, bus: ReplicaBus, hub: ServingHub) -> None:
        super().__init__(bus, "task", hub.rounds.spawn)
        self.hub = hub
        #: Requests carried to another replica, and served for another.
        self.forwarded = 0
        self.served_here = 0

    # ── the replica the request reached ──────────────────────────────────────

    async def forward(self, task: OwnedTask, digest: str, method: str,
                      params: dict[str, Any]) -> dict[str, Any]:
        self.forwarded += 1
        return await self.carry(task.replica, {"id": task.hub_id, "o": digest, "m": method,
                                               "p": params, "server": task.server})

    def silent(self, body: dict[str, Any]) -> MCPError:
        logger.warning("the replica holding a task of %s did not answer %s",
                       body["server"], body["m"])
        return MCPError(INVALID_PARAMS, UNKNOWN_TASK)

    # ── the replica that holds the task ──────────────────────────────────────

    def served(self) -> None:
        self.served_here += 1

    async def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("p")
        try:
            result = await self.hub.serve_task_for_replica(
                str(message.get("id")), str(message.get("o")), str(message.get("m")),
                dict(params) if isinstance(params, dict) else {})
        except Exception as exc:
            return error_reply(exc, "a carried tasks request")
        return {"result": result}


def relay_tasks(bus: ReplicaBus, hub: ServingHub) -> TaskRelay:
    """Name this replica in the task records as the bus does, and carry ``tasks/*``."""
    hub.task_owners.replica = bus.replica
    relay = TaskRelay(bus, hub)
    hub.task_forwarder = relay
    return relay
