"""A request carried to the replica that can serve it, over the replica bus, and its answer.

Some work cannot move between replicas: an input round's upstream call, an
upstream's task. A request for it that lands on another replica is carried
there, with one protocol for every kind ``K`` (``round``, ``task``):

1. the receiving replica publishes ``K`` (``to`` the serving replica, ``from``
   itself, a correlation id ``c`` and the kind's own fields) and waits;
2. the serving replica runs the request, says it is alive (``K-alive``) every
   :data:`ALIVE_SECONDS` while it works, may pass on notes (``K-note``), and
   publishes the answer (``K-reply``: ``result`` or a JSON-RPC ``error``);
3. a client that goes away makes the receiving replica send ``K-cancel``: the
   serving replica cancels the work;
4. a serving replica that says nothing (gone, with the work) is given up after
   :data:`FIRST_WORD_SECONDS`, then :data:`SILENCE_SECONDS` between words.

:class:`Carrier` is both ends; a kind says what it sends, how it answers, what
its notes mean and what silence means.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, ErrorData

from mcp_hub.downstream.replicas.bus import ReplicaBus
from mcp_hub.eras.held import RoundsFull

__all__ = ["ALIVE_SECONDS", "FIRST_WORD_SECONDS", "SILENCE_SECONDS", "Carrier", "Waiting",
           "error_reply"]

logger = logging.getLogger("mcp_hub.downstream.replicas")

#: How often the serving replica says it is still working on a carried request.
ALIVE_SECONDS = 5.0
#: How long the receiving replica waits for the first word, then between words.
FIRST_WORD_SECONDS = 10.0
SILENCE_SECONDS = 3 * ALIVE_SECONDS

#: Starts the serving side's work in the hub's background task group (or raises RoundsFull).
Spawn = Callable[[Callable[[], Coroutine[Any, Any, Any]]], None]


@dataclass(eq=False)
class Waiting:
    """A carried request this replica waits on."""

    #: What the kind keeps for its notes (e.g. the waiting request's call context).
    call: Any = None
    reply: dict[str, Any] | None = None
    heard: bool = False
    poke: anyio.Event = field(default_factory=anyio.Event)

    def wake(self) -> None:
        self.poke.set()
        self.poke = anyio.Event()


def error_reply(exc: Exception, what: str) -> dict[str, Any]:
    """The ``K-reply`` body for work that failed: its JSON-RPC error, or an internal one."""
    if isinstance(exc, MCPError):
        return {"error": exc.error.model_dump(by_alias=True, mode="json", exclude_none=True)}
    logger.warning("%s failed: %s", what, exc)
    return {"error": {"code": INTERNAL_ERROR, "message": str(exc)}}


class Carrier:
    """Both ends of one kind of carried request (see the module docstring)."""

    def __init__(self, bus: ReplicaBus, kind: str, spawn: Spawn) -> None:
        self.bus = bus
        self.kind = kind
        self.spawn = spawn
        self.waiting: dict[str, Waiting] = {}
        self.serving: dict[str, anyio.CancelScope] = {}
        bus.handlers.update({kind: self._on_request, f"{kind}-alive": self._on_word,
                             f"{kind}-note": self._on_word, f"{kind}-reply": self._on_word,
                             f"{kind}-cancel": self._on_cancel})

    def _mine(self, message: Any) -> bool:
        return isinstance(message, dict) and message.get("to") == self.bus.replica

    # ── the replica the request reached ──────────────────────────────────────

    async def carry(self, to: str | None, body: dict[str, Any], *, call: Any = None
                    ) -> dict[str, Any]:
        """Send ``body`` to replica ``to`` and return its result (its error raised as MCPError).

        Silence past the bounds calls :meth:`silent` (which raises); a cancelled
        caller sends ``K-cancel`` first."""
        corr = secrets.token_hex(8)
        waiting = self.waiting[corr] = Waiting(call=call)
        try:
            await self.bus.send(self.kind, {"to": to, "from": self.bus.replica, "c": corr, **body})
            while waiting.reply is None:
                poke = waiting.poke
                with anyio.move_on_after(SILENCE_SECONDS if waiting.heard
                                         else FIRST_WORD_SECONDS) as silent:
                    await poke.wait()
                if silent.cancelled_caught:
                    raise self.silent(body)
        except anyio.get_cancelled_exc_class():
            self.abandoned(body)
            with anyio.CancelScope(shield=True):
                await self.bus.send(f"{self.kind}-cancel", {"to": to, "c": corr})
            raise
        finally:
            self.waiting.pop(corr, None)
        error = waiting.reply.get("error")
        if error is not None:
            raise MCPError.from_error_data(ErrorData.model_validate(error))
        result: dict[str, Any] = waiting.reply["result"]
        return result

    def silent(self, body: dict[str, Any]) -> MCPError:
        """The error for a serving replica that stopped answering."""
        raise NotImplementedError

    def abandoned(self, body: dict[str, Any]) -> None:
        """The waiting request's client went away (before ``K-cancel`` is sent)."""

    async def note(self, waiting: Waiting, message: dict[str, Any]) -> None:
        """A ``K-note`` for the request waiting here (none by default)."""

    async def _on_word(self, message: Any) -> None:
        waiting = self.waiting.get(str(message.get("c"))) if self._mine(message) else None
        if waiting is None:
            return
        waiting.heard = True
        if "result" in message or "error" in message:
            waiting.reply = message
        elif "note" in message:
            await self.note(waiting, message)
        waiting.wake()

    # ── the replica that serves it ───────────────────────────────────────────

    async def answer(self, message: dict[str, Any]) -> dict[str, Any]:
        """Run a carried request here: ``{"result": …}`` or ``{"error": …}``."""
        raise NotImplementedError

    def served(self) -> None:
        """One carried request was answered here (for the kind's counters)."""

    async def send_note(self, message: dict[str, Any], kind: str, body: dict[str, Any]) -> None:
        """Pass a note of the running request back to the replica that carried it."""
        await self.bus.send(f"{self.kind}-note", {"to": message.get("from"), "c": str(message.get("c")),
                                                  "note": kind, **body})

    async def _on_request(self, message: Any) -> None:
        if not self._mine(message):
            return
        try:
            self.spawn(lambda: self._serve(message))
        except RoundsFull:  # shutting down: the other replica gives up on its own
            logger.info("a carried %s request arrived while the hub stops", self.kind)

    async def _serve(self, message: dict[str, Any]) -> None:
        corr, back = str(message.get("c")), message.get("from")
        reply: dict[str, Any]
        with anyio.CancelScope() as scope:
            self.serving[corr] = scope
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._alive, back, corr)
                    reply = await self.answer(message)
                    tg.cancel_scope.cancel()
                self.served()
                await self.bus.send(f"{self.kind}-reply", {"to": back, "c": corr, **reply})
            finally:
                self.serving.pop(corr, None)

    async def _alive(self, back: Any, corr: str) -> None:
        while True:
            await self.bus.send(f"{self.kind}-alive", {"to": back, "c": corr})
            await anyio.sleep(ALIVE_SECONDS)

    async def _on_cancel(self, message: Any) -> None:
        scope = self.serving.get(str(message.get("c"))) if self._mine(message) else None
        if scope is not None:
            scope.cancel()
