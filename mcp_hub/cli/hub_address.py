"""Where a hub serving a config listens, and whether one answers there.

``mcp-hub status``, ``tools`` and ``call`` ask the running hub when one serves
the config: its address is the config's ``[hub.http] host`` and ``port``
(a wildcard bind is reached on loopback). Whether it answers is one TCP
connect, tried before anything heavy is imported (so that ``tools`` and
``call`` start no upstream of their own when a hub runs: :mod:`mcp_hub.upstream.stdio.prespawn`).
Standard library only.
"""

from __future__ import annotations

import socket
import tomllib
from pathlib import Path

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "answers", "base_url", "configured_address"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: Wildcard binds and the loopback address a client on this machine reaches them at.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1", "[::]": "::1"}


def configured_address(path: Path | None) -> tuple[str, int]:
    """``[hub.http] host`` and ``port`` of the config at ``path`` (the defaults when unset)."""
    host, port = DEFAULT_HOST, DEFAULT_PORT
    if path is not None:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            data = {}  # the command itself reports a broken config
        http = data.get("hub", {}).get("http", {}) if isinstance(data.get("hub"), dict) else {}
        if isinstance(http, dict):
            if isinstance(http.get("host"), str):
                host = http["host"]
            if isinstance(http.get("port"), int) and http["port"] > 0:
                port = http["port"]
    return _WILDCARDS.get(host, host), port


def base_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a TCP connection at ``host:port``."""
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False
