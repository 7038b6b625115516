"""The ``instructions`` a client gets at initialize: what the hub is, and what is wrong now.

A client shows the model the initialize result's ``instructions``. When upstream
servers are parked or failing (a command that is not found, a bad token), they
name the problem, so a user who asks "what's wrong with my tools?" gets the
answer from the model instead of from a log file.

The text must reflect the state when the client initializes. Over HTTP the SDK
asks for the initialization options when a session starts, so
:class:`~mcp_hub.downstream.server.HubServer` computes them then. Over stdio the
options are made once, before the first message; :class:`FirstRequestGate`
holds the client's first request until the upstreams' first connection attempts
are done (bounded by ``startup_timeout`` — the first ``tools/list`` waits for the
same thing anyway) and refreshes the text just before the SDK answers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest

from mcp_hub.hub.diagnosis import problem
from mcp_hub.hub.interface import ServingHub

__all__ = ["BASE_INSTRUCTIONS", "FirstRequestGate", "hub_instructions"]

BASE_INSTRUCTIONS = (
    "This server is an MCP hub: it serves the tools, prompts and resources of several "
    "MCP servers under one endpoint. Tool names are prefixed with their server's name."
)


def hub_instructions(hub: ServingHub) -> str:
    """The base text, plus the current problem with the upstream servers if there is one."""
    upstreams = [{"name": s.name, "state": str(s.state), "last_error": s.last_error,
                  "tools": s.tools} for s in hub.upstream_statuses()]
    trouble = problem(upstreams, hub.config.source)
    if trouble is None:
        return BASE_INSTRUCTIONS
    return (f"{BASE_INSTRUCTIONS}\n\nProblem: {trouble} The hub_status tool reports the "
            "current state; relay this when the user asks why tools are missing.")


class FirstRequestGate:
    """A read stream that runs ``before_first`` before it hands over the first request."""

    def __init__(self, inner: Any, before_first: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._before_first: Callable[[], Awaitable[None]] | None = before_first

    @property
    def last_context(self) -> Any:
        """The sender context of the last message (what the SDK's dispatcher reads)."""
        return getattr(self._inner, "last_context", None)

    async def _pass(self, item: Any) -> Any:
        gate = self._before_first
        if gate is not None and isinstance(item, SessionMessage) \
                and isinstance(item.message, JSONRPCRequest):
            self._before_first = None
            await gate()
        return item

    async def receive(self) -> Any:
        return await self._pass(await self._inner.receive())

    def __aiter__(self) -> FirstRequestGate:
        return self

    async def __anext__(self) -> Any:
        return await self._pass(await self._inner.__anext__())

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> FirstRequestGate:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> bool | None:
        await self.aclose()
        return None
