"""The command line to run a stdio server by hand, for a connect failure's message.

A child that writes nothing on stdout before ``connect_timeout`` (``npx`` stuck
fetching a package behind a proxy or a CA it does not trust, a server waiting on
input) gives the hub nothing to report but the timeout. Running the very same
command in a terminal shows what it is doing, so the failure names it: the
child's ``cwd``, the ``PATH`` it gets (where the hub's search path differs most
from a shell's) and its argv, shell-quoted. ``env`` values are not spelled out
(they may be secrets): only their names, so the reader knows to set them.
"""

from __future__ import annotations

import shlex

from mcp_hub.config.model import ServerConfig
from mcp_hub.redact import redact
from mcp_hub.upstream.transports import child_environment

__all__ = ["by_hand_command", "timeout_hint"]


def by_hand_command(config: ServerConfig) -> str | None:
    """``cd DIR && PATH=... CMD ARGS`` for a stdio server (None: not a stdio server)."""
    if config.transport != "stdio" or config.command is None:
        return None
    parts: list[str] = []
    if config.cwd:
        parts.append(f"cd {shlex.quote(config.cwd)} &&")
    path = child_environment(config).get("PATH")
    if path:
        parts.append(f"PATH={shlex.quote(path)}")
    parts.extend(shlex.quote(word) for word in (config.command, *config.args))
    line = " ".join(parts)
    own = sorted(k for k in config.env if k != "PATH")
    if own:
        line += f" (with its env: {', '.join(own)})"
    return redact(line)


def timeout_hint(config: ServerConfig, stderr_seen: bool) -> str:
    """What a connect timeout's message adds: the stderr state and the by-hand command."""
    command = by_hand_command(config)
    if command is None:
        return ""
    quiet = "" if stderr_seen else "; it printed nothing on stderr"
    return f"{quiet}; try it by hand: {command}"
