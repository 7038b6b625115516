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
it) is given up after a few silent seconds with the unknown-task error.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, ErrorData

from mcp_hub.downstream.replicas.bus import ReplicaBus
from mcp_hub.eras.held import RoundsFull
from mcp_hub.hub.interface import ServingHub
from mcp_hub.hub.task_owners import OwnedTask

__all__ = ["TaskRelay", "relay_tasks"]

logger = logging.getLogger("mcp_hub.hub.core")

#: How often the holder says it still works on a carried request.
ALIVE_SECONDS = 5.0
#: How long the asking replica waits for the holder's first word, then between words.
FIRST_WORD_SECONDS = 10.0
SILENCE_SECONDS = 3 * ALIVE_SECONDS
#: The answer when the holder is silent: the same as for an unknown id.
UNKNOWN_TASK = "Unknown task id"


@dataclass(eq=False)
class _Waiting:
    reply: dict[str, Any] | None = None
    heard: bool = False
    poke: anyio.Event = field(default_factory=anyio.Event)

    def wake(self) -> None:
        self.poke.set()
        self.poke = anyio.Event()


class TaskRelay:
    """Carries ``tasks/*`` to the holding replica, and serves those carried here."""

    def __init__(self, bus: ReplicaBus, hub: ServingHub) -> None:
        self.bus = bus
        self.hub = hub
        self.waiting: dict[str, _Waiting] = {}
        self.serving: dict[str, anyio.CancelScope] = {}
        #: Requests carried to another replica, and served for another.
        self.forwarded = 0
        self.served = 0
        bus.handlers.update({"task": self._on_request, "task-alive": self._on_word,
                             "task-reply": self._on_word, "task-cancel": self._on_cancel})

    def _mine(self, message: Any) -> bool:
        return isinstance(message, dict) and message.get("to") == self.bus.replica

    # ── the replica the request reached ──────────────────────────────────────

    async def forward(self, task: OwnedTask, digest: str, method: str,
                      params: dict[str, Any]) -> dict[str, Any]:
        corr = secrets.token_hex(8)
        waiting = self.waiting[corr] = _Waiting()
        self.forwarded += 1
        try:
            await self.bus.send("task", {"to": task.replica, "from": self.bus.replica, "c": corr,
                                         "id": task.hub_id, "o": digest, "m": method,
                                         "p": params})
            while waiting.reply is None:
                poke = waiting.poke
                with anyio.move_on_after(SILENCE_SECONDS if waiting.heard
                                         else FIRST_WORD_SECONDS) as silent:
                    await poke.wait()
                if silent.cancelled_caught:
                    logger.warning("the replica holding a task of %s did not answer %s",
                                   task.server, method)
                    raise MCPError(INVALID_PARAMS, UNKNOWN_TASK)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self.bus.send("task-cancel", {"to": task.replica, "c": corr})
            raise
        finally:
            self.waiting.pop(corr, None)
        error = waiting.reply.get("error")
        if error is not None:
            raise MCPError.from_error_data(ErrorData.model_validate(error))
        result: dict[str, Any] = waiting.reply["result"]
        return result

    async def _on_word(self, message: Any) -> None:
        waiting = self.waiting.get(str(message.get("c"))) if self._mine(message) else None
        if waiting is None:
            return
        waiting.heard = True
        if "result" in message or "error" in message:
            waiting.reply = message
        waiting.wake()

    # ── the replica that holds the task ──────────────────────────────────────

    async def _on_request(self, message: Any) -> None:
        if not self._mine(message):
            return
        try:
            self.hub.rounds.spawn(lambda: self._serve(message))
        except RoundsFull:  # shutting down: the other replica gives up on its own
            logger.info("a carried tasks request arrived while the hub stops")

    async def _serve(self, message: dict[str, Any]) -> None:
        corr, back = str(message.get("c")), message.get("from")
        with anyio.CancelScope() as scope:
            self.serving[corr] = scope
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._alive, back, corr)
                    reply = await self._answer(message)
                    tg.cancel_scope.cancel()
                self.served += 1
                await self.bus.send("task-reply", {"to": back, "c": corr, **reply})
            finally:
                self.serving.pop(corr, None)

    async def _answer(self, message: dict[str, Any]) -> dict[str, Any]:
        params = message.get("p")
        try:
            result = await self.hub.serve_task_for_replica(
                str(message.get("id")), str(message.get("o")), str(message.get("m")),
                dict(params) if isinstance(params, dict) else {})
        except MCPError as exc:
            return {"error": exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        except Exception as exc:
            logger.warning("a carried tasks request failed: %s", exc)
            return {"error": {"code": INTERNAL_ERROR, "message": str(exc)}}
        return {"result": result}

    async def _alive(self, back: Any, corr: str) -> None:
        while True:
            await self.bus.send("task-alive", {"to": back, "c": corr})
            await anyio.sleep(ALIVE_SECONDS)

    async def _on_cancel(self, message: Any) -> None:
        scope = self.serving.get(str(message.get("c"))) if self._mine(message) else None
        if scope is not None:
            scope.cancel()


def relay_tasks(bus: ReplicaBus, hub: ServingHub) -> TaskRelay:
    """Name this replica in the task records as the bus does, and carry ``tasks/*``."""
    hub.task_owners.replica = bus.replica
    relay = TaskRelay(bus, hub)
    hub.task_forwarder = relay
    return relay
