"""The interface every state backend implements (:class:`StateBackend`)."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp_hub.errors import HubError

__all__ = ["BusHandler", "StateBackend", "StateUnavailable"]

#: Called with each message published on the bus (by any replica, this one included).
BusHandler = Callable[[bytes], Awaitable[None]]


class StateUnavailable(HubError):
    """The shared store cannot be reached; what needs it fails, the rest keeps working."""


class StateBackend(abc.ABC):
    """Keys with expiry, sliding-window counters and a broadcast bus.

    Every method that talks to the store raises :class:`StateUnavailable` when
    it cannot; callers decide whether that fails a request or degrades.
    """

    #: ``"embedded"`` or ``"redis"``, for status.
    kind: str = "abstract"
    #: True when several processes can share this store (replicas can).
    shared: bool = False

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Connect, keep the bus and the health check running while serving."""
        yield

    @property
    def available(self) -> bool:
        """Whether the store answered its last request or health check."""
        return True

    def status(self) -> dict[str, Any]:
        """For ``/readyz``, ``/status.json`` and ``hub_status``; never holds a secret."""
        return {"backend": self.kind, "available": self.available}

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The value of ``key``, or None."""

    @abc.abstractmethod
    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        """Store ``value`` under ``key``, forgotten after ``ttl`` seconds if given."""

    @abc.abstractmethod
    async def put_if_absent(self, key: str, value: bytes, ttl: float | None) -> bool:
        """Store ``value`` (forgotten after ``ttl`` s; None: kept) only if ``key`` has none:
        True if stored.

        Atomic across every process sharing the store: of two replicas racing for
        the same key, exactly one gets True (single-use tickets rely on it)."""

    @abc.abstractmethod
    async def take(self, key: str) -> bytes | None:
        """The value of ``key``, deleted in the same step (one taker wins), or None."""

    @abc.abstractmethod
    async def delete(self, key: str) -> None:
        """Forget ``key``."""

    @abc.abstractmethod
    async def set_add(self, key: str, member: str, ttl: float | None = None) -> None:
        """Add ``member`` to the set at ``key``."""

    @abc.abstractmethod
    async def set_remove(self, key: str, member: str) -> None:
        """Remove ``member`` from the set at ``key``."""

    @abc.abstractmethod
    async def set_members(self, key: str) -> set[str]:
        """The members of the set at ``key``."""

    @abc.abstractmethod
    async def admit(self, key: str, limit: int, window: float) -> bool:
        """Sliding window: True (and count it) if fewer than ``limit`` hits in ``window`` s."""

    @abc.abstractmethod
    async def publish(self, data: bytes) -> None:
        """Send ``data`` to every replica's bus handler."""

    @abc.abstractmethod
    def on_message(self, handler: BusHandler) -> None:
        """Register the handler of bus messages (one per process)."""
