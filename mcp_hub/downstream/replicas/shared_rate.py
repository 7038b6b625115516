"""The per-token rate limit, counted in the shared state store.

With ``[hub.http] rate_limit_per_minute`` and a shared store (``[state] url``),
every replica counts an identity's requests in one sliding window, so the limit
holds for the whole deployment rather than per replica. When the store is
unreachable each replica falls back to its own window (the limit then holds
per replica); the state store's status says the store is down.
"""

from __future__ import annotations

import hashlib
import logging

from mcp_hub.state import StateBackend, StateUnavailable

__all__ = ["SharedRateLimit"]

logger = logging.getLogger(__name__)


class SharedRateLimit:
    """A sliding one-minute window per identity, in the shared store."""

    def __init__(self, state: StateBackend, per_minute: int) -> None:
        self.state = state
        self.per_minute = per_minute
        self.fallbacks = 0

    async def admit(self, identity: str) -> bool | None:
        """True/False from the shared window; None when the store cannot be asked."""
        # Keyed by a digest of the identity's name: the store never holds who it is.
        key = f"rate:{hashlib.sha256(identity.encode()).hexdigest()[:24]}"
        try:
            return await self.state.admit(key, self.per_minute, 60.0)
        except StateUnavailable:
            self.fallbacks += 1
            return None
