"""Process-wide runtime facts that module-level tools need at call time.

Builtin tools register themselves at import time, before any config is loaded,
so their ``check_fn`` and handlers read the active settings from here. The Hub
sets them when it starts (and again on reload); tests set them directly.
This module imports nothing of the project but the config models.
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass

from mcp_hub.config import HubConfig

__all__ = ["Listener", "get_config", "get_listener", "is_exposed_without_auth", "set_config",
           "set_listener"]

_lock = threading.Lock()
_config: HubConfig = HubConfig()


@dataclass(frozen=True)
class Listener:
    """How the hub is being served: ``stdio`` or ``http`` on ``host``."""

    transport: str = "stdio"
    host: str = "127.0.0.1"
    authenticated: bool = False


_listener = Listener()


def get_config() -> HubConfig:
    """The active :class:`HubConfig` (an empty default before the hub starts)."""
    return _config


def set_config(config: HubConfig) -> None:
    """Make ``config`` the active configuration."""
    global _config
    with _lock:
        _config = config


def get_listener() -> Listener:
    """How the hub is being served right now."""
    return _listener


def set_listener(listener: Listener) -> None:
    """Record how the hub is being served (the serving side calls this)."""
    global _listener
    with _lock:
        _listener = listener


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_exposed_without_auth() -> bool:
    """True when the hub listens on a non-loopback address with no auth tokens."""
    listener = _listener
    return listener.transport == "http" and not is_loopback(listener.host) and not (
        listener.authenticated
    )
