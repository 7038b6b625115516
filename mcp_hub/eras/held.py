"""Held input rounds: upstream calls that wait on a 2026-07-28 client between requests.

A 2025-era upstream asks for sampling, elicitation or roots *inside* a call, as a
server-initiated request. A 2026-07-28 client cannot receive such a request: it
gets an ``InputRequiredResult`` instead and re-sends the call with the answers.
Between those two requests the upstream call keeps running and its request
waits. That running call, with its unanswered requests, is a :class:`Round`.

A :class:`HeldRounds` store runs the calls (they outlive the downstream request
that started them), parks a round between requests under a single-use token,
and ends a round nobody came back for: its pending upstream requests fail with
an error (the upstream is told), then the call is cancelled (the upstream gets
``notifications/cancelled``). The number of rounds alive at once is bounded.

:class:`HeldRounds` is the interface; :class:`LocalHeldRounds` keeps rounds in
this process. A store shared by replicas implements the same interface (the
token then names the replica that owns the running call, so a retry that lands
elsewhere can be routed there).

This module imports nothing of the project above :mod:`mcp_hub.errors`.
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.abc
from mcp.types import REQUEST_TIMEOUT, ErrorData

from mcp_hub.errors import HubError

__all__ = ["Ask", "Forwarder", "HeldRounds", "LocalHeldRounds", "Round", "RoundCancelled",
           "RoundsFull", "owner_of"]

logger = logging.getLogger("mcp_hub.eras")

#: How long a round may wait for the client's retry, by default.
DEFAULT_TTL = 300.0
#: How many rounds may be alive at once, by default.
DEFAULT_MAX = 1000


class RoundsFull(HubError):
    """No room for another round: the upstream's request gets an error instead."""


class RoundCancelled(HubError):
    """The round's call was cancelled (abandoned, or its client went away)."""


@dataclass(eq=False)
class Ask:
    """One upstream request waiting for the client: its wire form and its answer."""

    key: str
    method: str
    #: The request as it goes into ``inputRequests`` (an SDK request model).
    request: Any
    done: anyio.Event = field(default_factory=anyio.Event)
    response: dict[str, Any] | None = None
    error: ErrorData | None = None
    #: Whether the client has been shown this request in an ``InputRequiredResult``.
    sent: bool = False

    def answer(self, response: dict[str, Any]) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()

    def fail(self, error: ErrorData) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


@dataclass(eq=False)
class Round:
    """One upstream call spanning several downstream requests."""

    id: str
    method: str
    target: str
    #: Which retry is expected next; a token names (id, seq) and is good once.
    seq: int = 0
    asks: dict[str, Ask] = field(default_factory=dict)
    finished: bool = False
    result: Any = None
    error: BaseException | None = None
    #: Set whenever something the waiting request cares about happens.
    changed: anyio.Event = field(default_factory=anyio.Event)
    #: While parked between requests: when it expires (``anyio.current_time()``).
    deadline: float | None = None
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    #: What the serving side attaches (the call context of the current request).
    attached: Any = None
    _keys: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _poke(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def add_ask(self, method: str, request: Any, key: str | None = None) -> Ask:
        """A question for the client, under ``key`` (an upstream's own key) when given and
        free in this round, else under a key of the hub's (``elicitation-1``, …)."""
        while key is None or key in self.asks:
            key = f"{method.split('/')[0]}-{next(self._keys)}"
        ask = Ask(key=key, method=method, request=request)
        self.asks[ask.key] = ask
        self._poke()
        return ask

    def drop_ask(self, ask: Ask) -> None:
        self.asks.pop(ask.key, None)

    def unsent(self) -> list[Ask]:
        return [a for a in self.asks.values() if not a.sent and not a.done.is_set()]

    def finish(self, result: Any = None, error: BaseException | None = None) -> None:
        self.finished, self.result, self.error = True, result, error
        self._poke()

    async def wait_for_stop(self) -> None:
        """Until the call has finished or asks something the client has not seen."""
        while not self.finished and not self.unsent():
            await self.changed.wait()

    def abandon(self, message: str) -> None:
        """Fail every pending upstream request, then cancel the call."""
        for ask in list(self.asks.values()):
            ask.fail(ErrorData(code=REQUEST_TIMEOUT, message=message))
        self.scope.cancel()


def owner_of(token: str) -> str | None:
    """The replica a round's token names (``replica:round.seq``), if it names one."""
    owner, sep, _ = token.partition(":")
    return owner if sep else None


class Forwarder(Protocol):
    """Carries a retry to the replica that owns its round; returns that replica's answer."""

    async def forward(self, token: str, method: str, target: str,
                      responses: dict[str, Any], call: Any) -> dict[str, Any]:
        """The wire form of the result (the final one, or the next round); raises MCPError.

        ``call`` (a call context of the waiting request) gets the round's progress
        and log messages meanwhile.
        """
        ...


class HeldRounds(Protocol):
    """Where rounds run and wait between downstream requests."""

    #: This replica's name in the tokens, when replicas share the rounds' retries.
    replica: str | None
    #: Set when a retry for a round of another replica can be carried there.
    forwarder: Forwarder | None

    def start(self, method: str, target: str, run: Callable[[Round], Awaitable[Any]]) -> Round:
        """Start ``run(round)`` in the background; raises :class:`RoundsFull`."""
        ...

    def hold(self, round_: Round) -> str:
        """Park ``round_`` until the client's retry; returns the single-use token."""
        ...

    def claim(self, token: str) -> Round | None:
        """The round a retry's token names, taken out of the parked set (once)."""
        ...

    def release(self, round_: Round) -> None:
        """Forget a round whose call has ended (or was abandoned)."""
        ...

    def __len__(self) -> int: ...

    def report(self) -> dict[str, Any]:
        """Counts for the status page: rounds alive, rounds expired, the limits."""
        ...


class LocalHeldRounds:
    """Rounds in this process: a task group for the calls and one expiry watcher."""

    def __init__(self, *, ttl: float = DEFAULT_TTL, max_rounds: int = DEFAULT_MAX) -> None:
        self.ttl = ttl
        self.max_rounds = max_rounds
        self._rounds: dict[str, Round] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._wake = anyio.Event()
        #: Rounds ended because the client never came back (for status and tests).
        self.expired = 0
        self.replica: str | None = None
        self.forwarder: Forwarder | None = None
        #: Retries carried to the replica that owned their round, and served for another.
        self.forwarded = 0
        self.served_remote = 0

    def __len__(self) -> int:
        return len(self._rounds)

    def report(self) -> dict[str, Any]:
        report: dict[str, Any] = {"alive": len(self._rounds), "expired": self.expired,
                                  "ttl_seconds": self.ttl, "max": self.max_rounds}
        if self.replica is not None:
            report.update(forwarded=self.forwarded, served_for_other_replicas=self.served_remote)
        return report

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
                  ) -> None:
        """Own the rounds' tasks and expire parked rounds; until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await self._expire_forever()
            finally:
                self._tg = None
                for round_ in list(self._rounds.values()):
                    round_.abandon("the hub is shutting down")

    async def _expire_forever(self) -> None:
        while True:
            now = anyio.current_time()
            deadlines = []
            for round_ in list(self._rounds.values()):
                if round_.deadline is None:
                    continue
                if round_.deadline <= now:
                    self.expired += 1
                    logger.info("input round for %s %s expired unanswered; upstream told",
                                round_.method, round_.target)
                    round_.deadline = None
                    round_.abandon("the client did not answer within the hub's input-round TTL")
                    self.release(round_)
                else:
                    deadlines.append(round_.deadline)
            wake = self._wake
            with anyio.move_on_after(min(deadlines, default=now + self.ttl) - now):
                await wake.wait()

    def start(self, method: str, target: str, run: Callable[[Round], Awaitable[Any]]) -> Round:
        if self._tg is None:
            raise RoundsFull("input rounds are not available (the hub is not running)")
        if len(self._rounds) >= self.max_rounds:
            raise RoundsFull(f"the hub already holds {self.max_rounds} input rounds")
        round_ = Round(id=secrets.token_urlsafe(16), method=method, target=target)
        self._rounds[round_.id] = round_
        self._tg.start_soon(self._drive, round_, run)
        return round_

    async def _drive(self, round_: Round, run: Callable[[Round], Awaitable[Any]]) -> None:
        with round_.scope:
            try:
                round_.finish(result=await run(round_))
                return
            except Exception as exc:
                round_.finish(error=exc)
                return
        # Only a cancelled scope gets here.
        round_.finish(error=RoundCancelled("the call was cancelled"))
        self.release(round_)

    def hold(self, round_: Round) -> str:
        round_.seq += 1
        round_.deadline = anyio.current_time() + self.ttl
        self._wake.set()
        self._wake = anyio.Event()
        token = f"{round_.id}.{round_.seq}"
        return f"{self.replica}:{token}" if self.replica is not None else token

    def spawn(self, run: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``run()`` in the rounds' task group (a retry served for another replica)."""
        if self._tg is None:
            raise RoundsFull("input rounds are not available (the hub is not running)")
        self._tg.start_soon(run)

    def claim(self, token: str) -> Round | None:
        if owner_of(token) != self.replica:
            return None
        rid, _, seq = token.rpartition(":")[2].partition(".")
        round_ = self._rounds.get(rid)
        if round_ is None or round_.deadline is None or str(round_.seq) != seq:
            return None
        round_.deadline = None
        return round_

    def release(self, round_: Round) -> None:
        if self._rounds.get(round_.id) is round_:
            del self._rounds[round_.id]
