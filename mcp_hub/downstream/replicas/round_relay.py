"""A 2026-07-28 client's retry of an input round, carried to the replica that runs the call.

Behind a round-robin load balancer the retry of an input round (the call
re-sent with ``inputResponses`` and ``requestState``) may reach another
replica than the one whose background task runs the upstream call and holds
the upstream's question. That call cannot move, so the retry goes to it:

1. Every replica opens every other replica's ``requestState`` (the seal's key
   is derived from the shared ``[hub.http] session_secret``), so the seal and
   its bindings (arguments, target, identity, expiry) are checked where the
   retry lands. Inside is the round store's token, which names the owning
   replica.
2. The receiving replica publishes the retry on the replica bus (``round``);
   the owner claims the round (single use, as locally), hands the answers to
   the waiting upstream requests and, while the call goes on, says it is alive
   (``round-alive``) every few seconds and passes on the call's progress and
   log messages (``round-note``); then it publishes the result (``round-reply``):
   the final one, or the next round with a new token.
3. The receiving replica answers its client with that result (sealing the new
   token). A client that closes its request sends ``round-cancel``: the owner
   ends the round as for a local cancel (the upstream is told).

An owner that never answers (its replica is gone, and the upstream call with
it) is given up after a few silent seconds, and the retry is refused like any
state whose round no longer exists: the client starts the call again.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS, ErrorData

from mcp_hub.downstream.input_rounds import resume_for_replica
from mcp_hub.downstream.replicas.bus import ReplicaBus
from mcp_hub.eras.held import LocalHeldRounds, RoundsFull, owner_of

__all__ = ["RoundRelay", "relay_rounds"]

logger = logging.getLogger("mcp_hub.eras")

#: How often the owner says it is still working on a forwarded retry.
ALIVE_SECONDS = 5.0
#: How long the receiving replica waits for the owner's first word, then between words.
FIRST_WORD_SECONDS = 10.0
SILENCE_SECONDS = 3 * ALIVE_SECONDS


@dataclass(eq=False)
class _Waiting:
    """A forwarded retry this replica waits on."""

    #: The call context of the waiting request: the round's progress and logs go there.
    call: Any = None
    reply: dict[str, Any] | None = None
    heard: bool = False
    poke: anyio.Event = field(default_factory=anyio.Event)

    def wake(self) -> None:
        self.poke.set()
        self.poke = anyio.Event()


class RoundRelay:
    """Forwards retries of other replicas' rounds, and serves those of this one's."""

    def __init__(self, bus: ReplicaBus, store: LocalHeldRounds) -> None:
        self.bus = bus
        self.store = store
        self.waiting: dict[str, _Waiting] = {}
        self.serving: dict[str, anyio.CancelScope] = {}
        bus.handlers.update({"round": self._on_retry, "round-alive": self._on_word,
                             "round-note": self._on_word, "round-reply": self._on_word,
                             "round-cancel": self._on_cancel})

    def _mine(self, message: Any) -> bool:
        return isinstance(message, dict) and message.get("to") == self.bus.replica

    # ── the replica the retry reached ────────────────────────────────────────

    async def forward(self, token: str, method: str, target: str,
                      responses: dict[str, Any], call: Any) -> dict[str, Any]:
        corr = secrets.token_hex(8)
        waiting = self.waiting[corr] = _Waiting(call=call)
        self.store.forwarded += 1
        try:
            await self.bus.send("round", {"to": owner_of(token), "from": self.bus.replica,
                                          "c": corr, "token": token, "method": method,
                                          "target": target, "responses": responses})
            while waiting.reply is None:
                poke = waiting.poke
                with anyio.move_on_after(SILENCE_SECONDS if waiting.heard
                                         else FIRST_WORD_SECONDS) as silent:
                    await poke.wait()
                if silent.cancelled_caught:
                    logger.warning("the replica holding the input round of %s %s did not "
                                   "answer; requestState refused", method, target)
                    raise MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState",
                                   data={"reason": "invalid_request_state"})
        except anyio.get_cancelled_exc_class():
            logger.info("the client of a forwarded retry of %s %s went away; the owning "
                        "replica ends the round", method, target)
            with anyio.CancelScope(shield=True):
                await self.bus.send("round-cancel", {"to": owner_of(token), "c": corr})
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
        elif message.get("note") in ("progress", "log") and waiting.call is not None:
            await self._relay_note(waiting.call, message)
        waiting.wake()

    @staticmethod
    async def _relay_note(call: Any, message: dict[str, Any]) -> None:
        """A progress or log message of the round, for the request waiting here."""
        try:
            if message["note"] == "progress":
                await call.report_progress(float(message["progress"]), message.get("total"),
                                           message.get("message"))
            else:
                await call.log(message["level"], message.get("data"), message.get("logger"))
        except Exception:  # a closing request, a malformed note: the round goes on
            logger.debug("a forwarded round's note was not delivered", exc_info=True)

    # ── the replica that owns the round ──────────────────────────────────────

    async def _on_retry(self, message: Any) -> None:
        if not self._mine(message):
            return
        try:
            self.store.spawn(lambda: self._serve(message))
        except RoundsFull:  # shutting down: the other replica gives up on its own
            logger.info("a forwarded input-round retry arrived while the hub stops")

    async def _serve(self, message: dict[str, Any]) -> None:
        corr, back = str(message.get("c")), message.get("from")
        reply: dict[str, Any]
        with anyio.CancelScope() as scope:
            self.serving[corr] = scope
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._alive, back, corr)
                    reply = await self._resume(message)
                    tg.cancel_scope.cancel()
                self.store.served_remote += 1
                await self.bus.send("round-reply", {"to": back, "c": corr, **reply})
            finally:
                self.serving.pop(corr, None)

    async def _resume(self, message: dict[str, Any]) -> dict[str, Any]:
        back, corr = message.get("from"), str(message.get("c"))

        async def notes(kind: str, body: dict[str, Any]) -> None:
            try:
                await self.bus.send("round-note", {"to": back, "c": corr, "note": kind, **body})
            except (TypeError, ValueError):  # log data that is not JSON: dropped
                logger.debug("a forwarded round's %s message was not sent", kind)

        try:
            result = await resume_for_replica(
                self.store, str(message.get("token")), str(message.get("method")),
                str(message.get("target")), dict(message.get("responses") or {}), notes)
        except MCPError as exc:
            return {"error": exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
        except Exception as exc:
            logger.warning("a forwarded input round failed: %s", exc)
            return {"error": {"code": INTERNAL_ERROR, "message": str(exc)}}
        return {"result": result}

    async def _alive(self, back: Any, corr: str) -> None:
        while True:
            await self.bus.send("round-alive", {"to": back, "c": corr})
            await anyio.sleep(ALIVE_SECONDS)

    async def _on_cancel(self, message: Any) -> None:
        scope = self.serving.get(str(message.get("c"))) if self._mine(message) else None
        if scope is not None:
            scope.cancel()


def relay_rounds(bus: ReplicaBus, store: Any) -> RoundRelay | None:
    """Name this replica in the rounds' tokens and carry retries between replicas."""
    if not isinstance(store, LocalHeldRounds):
        return None
    store.replica = bus.replica
    relay = RoundRelay(bus, store)
    store.forwarder = relay
    return relay
