"""Runtime facts that builtin tools need at call time, one set per Hub.

Builtin tools are declared at import time, before any config is loaded, so
their ``check_fn`` and handlers cannot take the config as a parameter. Each Hub
owns a :class:`Runtime` (its config and how it is served) and registers the
builtins into its own registry *bound* to it (:func:`bind`): a bound function
runs with that Runtime as the current one, so :func:`get_config` inside a
builtin answers for the Hub that called it, even with two Hubs in one process.

Outside any Hub (tests calling a builtin directly), the current Runtime is a
fallback that :func:`set_config`/:func:`set_listener` write; a Hub never writes
it. This module imports nothing of the project but the config models.
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_hub.config.model import HubConfig

__all__ = ["Listener", "Runtime", "bind", "current", "get_config", "get_listener",
           "is_exposed_without_auth", "is_loopback", "set_config", "set_listener"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Listener:
    """How the hub is being served: ``stdio`` or ``http`` on ``host``."""

    transport: str = "stdio"
    host: str = "127.0.0.1"
    authenticated: bool = False


@dataclass
class Runtime:
    """One Hub's runtime facts: its active config and how it is served."""

    config: HubConfig = field(default_factory=HubConfig)
    listener: Listener = field(default_factory=Listener)

    def is_exposed_without_auth(self) -> bool:
        """True when served over HTTP on a non-loopback address with no sign-in."""
        listener = self.listener
        return listener.transport == "http" and not is_loopback(listener.host) and not (
            listener.authenticated
        )


_fallback = Runtime()
_current: ContextVar[Runtime | None] = ContextVar("mcp_hub.pipeline.runtime", default=None)


def current() -> Runtime:
    """The Runtime of the Hub whose bound builtin is running (else the fallback)."""
    bound = _current.get()
    return _fallback if bound is None else bound


def bind(runtime: Runtime, fn: F, *, is_async: bool | None = None) -> F:
    """``fn`` wrapped so it runs with ``runtime`` current (sync or async alike).

    ``is_async`` says whether calling ``fn`` returns an awaitable to await inside
    the binding (default: whether it is a coroutine function).
    """
    if is_async if is_async is not None else inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def bound_async(*args: Any, **kwargs: Any) -> Any:
            token = _current.set(runtime)
            try:
                return await fn(*args, **kwargs)
            finally:
                _current.reset(token)
        return bound_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def bound(*args: Any, **kwargs: Any) -> Any:
        token = _current.set(runtime)
        try:
            return fn(*args, **kwargs)
        finally:
            _current.reset(token)
    return bound  # type: ignore[return-value]


def get_config() -> HubConfig:
    """The current Hub's :class:`HubConfig` (an empty default outside any Hub)."""
    return current().config


def set_config(config: HubConfig) -> None:
    """Set the fallback Runtime's config (for code run outside any Hub)."""
    _fallback.config = config


def get_listener() -> Listener:
    """How the current Hub is being served."""
    return current().listener


def set_listener(listener: Listener) -> None:
    """Set the fallback Runtime's listener (for code run outside any Hub)."""
    _fallback.listener = listener


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_exposed_without_auth() -> bool:
    """True when the current Hub listens on a non-loopback address with no sign-in."""
    return current().is_exposed_without_auth()
