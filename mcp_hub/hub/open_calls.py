"""The tool calls each Streamable HTTP session has running, so they can be abandoned.

When a call's answer can no longer be delivered — its response stream dropped
and the client did not resume it within the grace window, or its session ended
— the call is cancelled: the upstream receives ``notifications/cancelled`` and
stops working for nobody. Calls are keyed by (session id, request id).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

__all__ = ["OpenCalls"]

logger = logging.getLogger(__name__)

_Key = tuple[str, str]


class OpenCalls:
    """Cancel scopes of running calls, by (session id, request id)."""

    def __init__(self) -> None:
        self._scopes: dict[_Key, anyio.CancelScope] = {}

    def __contains__(self, key: _Key) -> bool:
        return key in self._scopes

    def __len__(self) -> int:
        return len(self._scopes)

    @contextmanager
    def track(self, session_id: str | None, request_id: Any) -> Iterator[anyio.CancelScope]:
        """Run one call under a scope that :meth:`abandon` cancels (untracked without a session)."""
        scope = anyio.CancelScope()
        key = (session_id, str(request_id)) if session_id is not None else None
        if key is not None:
            self._scopes[key] = scope
        try:
            with scope:
                yield scope
        finally:
            if key is not None and self._scopes.get(key) is scope:
                del self._scopes[key]

    def abandon(self, session_id: str, request_id: str, why: str) -> bool:
        """Cancel the call if it still runs; returns whether it did."""
        scope = self._scopes.pop((session_id, request_id), None)
        if scope is None:
            return False
        logger.info("cancelling call %s of session %s…: %s", request_id, session_id[:8], why)
        scope.cancel()
        return True

    def abandon_session(self, session_id: str, why: str) -> int:
        """Cancel every call of a session that ended."""
        keys = [k for k in self._scopes if k[0] == session_id]
        for key in keys:
            self.abandon(key[0], key[1], why)
        return len(keys)
