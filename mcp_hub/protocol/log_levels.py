"""MCP logging levels, and the one place a client's chosen level is kept.

A handshake-era client may send ``logging/setLevel``; from then on the hub
forwards it only log messages at or above that level. The level is stored on
the client's connection state under :data:`LOG_LEVEL_KEY`; every reader and
writer goes through :func:`client_log_level` and :func:`set_client_log_level`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["LOG_LEVELS", "LOG_LEVEL_KEY", "below_level", "client_log_level",
           "most_verbose", "set_client_log_level"]

LOG_LEVELS: dict[str, int] = {
    "debug": 0, "info": 1, "notice": 2, "warning": 3,
    "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

#: The key of a client's logging level on its connection state (a dict).
LOG_LEVEL_KEY = "mcp_hub.log_level"


def below_level(level: str, threshold: str | None) -> bool:
    """True when a client set a logging level (``threshold``) and ``level`` is under it."""
    return threshold is not None and LOG_LEVELS.get(level, 0) < LOG_LEVELS.get(threshold, 0)


def client_log_level(state: Any) -> str | None:
    """The level a client set, from its connection state (None: it set none)."""
    if isinstance(state, dict):
        level = state.get(LOG_LEVEL_KEY)
        return level if isinstance(level, str) else None
    return None


def set_client_log_level(state: Any, level: str) -> None:
    """Record the level a client set on its connection state (ignored without one)."""
    if isinstance(state, dict):
        state[LOG_LEVEL_KEY] = level


def most_verbose(levels: Iterable[str]) -> str:
    """The most verbose of ``levels`` (what upstreams log at when clients differ)."""
    return min(levels, key=lambda lv: LOG_LEVELS.get(lv, 0))
