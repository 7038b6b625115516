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
state whose round no longer exists: the client starts the call again. The
carrying itself is :mod:`mcp_hub.downstream.replicas.carried`, shared with tasks.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_hub.downstream.input_rounds import resume_for_replica
from mcp_hub.downstream.replicas.bus import ReplicaBus
from mcp_hub.downstream.replicas.carried import Carrier, Waiting, error_reply
from mcp_hub.eras.held import LocalHeldRounds, owner_of

__all__ = ["RoundRelay", "relay_rounds"]

logger = logging.getLogger("mcp_hub.eras")


class RoundRelay(Carrier):
    """Forwards retries of other replicas' rounds, and serves those of this one's."""

    def __init__(self, bus: ReplicaBus, store: LocalHeldRounds) -> None:
        super().__init__(bus, "round", store.spawn)
        self.store = store

    # ── the replica the retry reached ────────────────────────────────────────

    async def forward(self, token: str, method: str, target: str,
                      responses: dict[str, Any], call: Any) -> dict[str, Any]:
        self.store.forwarded += 1
        return await self.carry(owner_of(token), {"token": token, "method": method,
                                                  "target": target, "responses": responses},
                                call=call)

    def silent(self, body: dict[str, Any]) -> MCPError:
        logger.warning("the replica holding the input round of %s %s did not answer; "
                       "requestState refused", body["method"], body["target"])
        return MCPError(code=INVALID_PARAMS, message="Invalid or expired requestState",
                        data={"reason": "invalid_request_state"})

    def abandoned(self, body: dict[str, Any]) -> None:
        logger.info("the client of a forwarded retry of %s %s went away; the owning "
                    "replica ends the round", body["method"], body["target"])

    async def note(self, waiting: Waiting, message: dict[str, Any]) -> None:
        """A progress or log message of the round, for the request waiting here."""
        call = waiting.call
        if message.get("note") not in ("progress", "log") or call is None:
            return
        try:
            if message["note"] == "progress":
                await call.report_progress(float(message["progress"]), message.get("total"),
                                           message.get("message"))
            else:
                await call.log(message["level"], message.get("data"), message.get("logger"))
        except Exception:  # a closing request, a malformed note: the round goes on
            logger.debug("a forwarded round's note was not delivered", exc_info=True)

    # ── the replica that owns the round ──────────────────────────────────────

    def served(self) -> None:
        self.store.served_remote += 1

    async def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        async def notes(kind: str, body: dict[str, Any]) -> None:
            try:
                await self.send_note(message, kind, body)
            except (TypeError, ValueError):  # log data that is not JSON: dropped
                logger.debug("a forwarded round's %s message was not sent", kind)

        try:
            result = await resume_for_replica(
                self.store, str(message.get("token")), str(message.get("method")),
                str(message.get("target")), dict(message.get("responses") or {}), notes)
        except Exception as exc:
            return error_reply(exc, "a forwarded input round")
        return {"result": result}


def relay_rounds(bus: ReplicaBus, store: Any) -> RoundRelay | None:
    """Name this replica in the rounds' tokens and carry retries between replicas."""
    if not isinstance(store, LocalHeldRounds):
        return None
    store.replica = bus.replica
    relay = RoundRelay(bus, store)
    store.forwarder = relay
    return relay
