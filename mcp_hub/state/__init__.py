"""Shared state of hub replicas: one interface, an embedded and a Redis backend.

The hub keeps a little state that every replica serving the same clients must
agree on: session state that changes after ``initialize`` (log level, resource
subscriptions), per-token rate-limit windows, and a message bus between
replicas (cancels, answers to server-to-client requests, notifications for a
GET stream another replica holds). Tool pins use the same choice of backend
(:mod:`mcp_hub.pins.redis_store`).

:func:`open_state` picks the backend from ``[state] url``: none (the default)
gives :class:`~mcp_hub.state.embedded.EmbeddedState`, in-process and needing
nothing installed; ``redis://`` or ``rediss://`` gives
:class:`~mcp_hub.state.redis_backend.RedisState`.
"""

from __future__ import annotations

from mcp_hub.state.base import BusHandler, StateBackend, StateUnavailable
from mcp_hub.state.embedded import EmbeddedState

__all__ = ["BusHandler", "EmbeddedState", "StateBackend", "StateUnavailable", "open_state",
           "require_redis"]


def require_redis() -> None:
    """Fail with a ConfigError naming the extra when redis-py is not installed."""
    import importlib.util

    if importlib.util.find_spec("redis") is None:
        from mcp_hub.errors import ConfigError

        raise ConfigError("[state] url names Redis, but redis-py is not installed: "
                          "pip install 'mcp-hub[redis]'")


def open_state(url: str | None, *, prefix: str = "mcp-hub") -> StateBackend:
    """The backend ``url`` names: embedded without one, Redis for ``redis://``/``rediss://``."""
    if not url:
        return EmbeddedState()
    if url.startswith(("redis://", "rediss://", "unix://")):
        require_redis()
        from mcp_hub.state.redis_backend import RedisState

        return RedisState(url, prefix=prefix)
    from mcp_hub.errors import ConfigError

    raise ConfigError(f"[state] url: unsupported scheme in {url.split('://')[0]!r}; "
                      "use redis://HOST:PORT/DB or leave it out for the embedded store")
