"""Start-up waits: one deadline, counted from the hub's start, for every request.

Right after start some upstreams are still connecting. A request that needs
them may wait for them, but only by these rules, the same on every transport
(the stdio fast path, the SDK server over stdio, Streamable HTTP, SSE, and
``tool_call`` through the tool-search bridge):

- There is one deadline: ``startup_timeout`` seconds after the hub started.
  Nothing waits for the initial connects after it, whatever happens to the
  servers that have not finished (an upstream that never completes its
  handshake cannot make every later request pay the wait again).
- A list (``tools/list``, ``prompts/list``, ``resources/list``, ``tool_search``)
  waits for every server's first connection attempt, but never past the deadline.
- A call to a tool that is registered never waits: it runs at once, whatever
  the other servers are doing.
- A call to a name that is not registered yet waits only for the servers whose
  prefix could produce that name (the name starts with ``prefix + separator``, or
  is the prefix itself when ``[hub] dedupe_prefix`` is on; a server with an empty
  prefix could produce any name), until the name appears, those servers' first attempts end, or the
  deadline passes; then it runs (and fails as an unknown tool if still absent).

A request whose wait the deadline cut short logs one line saying so and naming
the servers still on their first attempt, before it goes on: an operator sees
why that answer took ``startup_timeout``, and which servers to look at.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio

from mcp_hub.registry.naming import sanitize_name
from mcp_hub.search.exposure import TOOL_CALL

__all__ = ["StartupGate"]

logger = logging.getLogger(__name__)


class StartupGate:
    """Holds the start-up deadline and answers "how long may this request wait"."""

    def __init__(self, upstreams: Any, registry: Any, timeout: float, separator: str, *,
                 dedupe: bool = False) -> None:
        self.upstreams = upstreams
        self.registry = registry
        self.separator = separator
        #: ``[hub] dedupe_prefix``: a server's tool named like the server is exposed as the
        #: bare prefix, so that name too could come from it.
        self.dedupe = dedupe
        self.deadline = time.monotonic() + timeout

    def restart(self, timeout: float) -> None:
        """Count the deadline from now (the hub calls this when it starts serving)."""
        self.deadline = time.monotonic() + timeout

    def remaining(self) -> float:
        """Seconds left before the deadline (0 once it has passed)."""
        return max(0.0, self.deadline - time.monotonic())

    @property
    def passed(self) -> bool:
        return self.remaining() <= 0.0

    async def wait_lists(self) -> None:
        """A list waits for the initial connects, until the deadline at most."""
        if self.upstreams.initial_done:
            return
        left = self.remaining()
        if left <= 0:
            return
        with anyio.move_on_after(left) as waited:
            await self.upstreams.ready_event.wait()
        if waited.cancelled_caught:
            self._cut_short("a request")

    async def before_call(self, name: str, arguments: dict[str, Any] | None,
                          bridged: bool) -> None:
        """What a ``tools/call`` of ``name`` waits for before it runs (see the module rules).

        ``bridged`` says the tool-search bridge answers ``name``: ``tool_call``
        waits as a call to the tool it names, ``tool_search`` and
        ``tool_describe`` wait as a list.
        """
        if bridged:
            target = arguments.get("name") if arguments else None
            if name != TOOL_CALL:
                await self.wait_lists()
                return
            if not isinstance(target, str) or not target.strip():
                return
            name = target.strip()
        await self.wait_for_tool(name)

    def _candidates(self, name: str) -> list[Any]:
        """The servers still on their first attempt that could provide ``name``."""
        out = []
        for conn in self.upstreams.connections():
            if conn.first_done.is_set() or not conn.config.enabled:
                continue
            prefix = conn.prefix
            if (not prefix or name.startswith(sanitize_name(prefix + self.separator))
                    or (self.dedupe and name == sanitize_name(prefix))):
                out.append(conn)
        return out

    async def wait_for_tool(self, name: str) -> None:
        """Wait (bounded by the deadline) until ``name`` is registered or cannot be soon."""
        registry = self.registry
        if registry.get_entry(name) is not None or self.upstreams.initial_done:
            return
        left = self.remaining()
        if left <= 0:
            return
        candidates = self._candidates(name)
        if not candidates:
            return
        with anyio.move_on_after(left) as waited:
            async with anyio.create_task_group() as tg:

                async def first_attempts_done() -> None:
                    for conn in candidates:
                        await conn.first_done.wait()
                    tg.cancel_scope.cancel()

                async def registered() -> None:
                    await self.upstreams.wait_until(lambda: registry.get_entry(name) is not None)
                    tg.cancel_scope.cancel()

                tg.start_soon(first_attempts_done)
                tg.start_soon(registered)
        if waited.cancelled_caught:
            self._cut_short(f"a call of {name!r}")

    def _cut_short(self, what: str) -> None:
        """Log that the deadline ended ``what``'s wait, and who had not finished."""
        still = sorted(conn.name for conn in self.upstreams.connections()
                       if not conn.first_done.is_set() and conn.config.enabled)
        logger.info("start-up deadline reached: %s waited for it; still on their first "
                    "connection attempt: %s", what, ", ".join(still) or "none")
