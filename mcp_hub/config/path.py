"""Where ``servers.toml`` is: the documented search order, standard library only.

Both :mod:`mcp_hub.config.model` and :mod:`mcp_hub.upstream.stdio.prespawn` (which runs before
anything heavy is imported) use it, so it imports nothing else of the project.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["find_config_path"]


def find_config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """``--config``, ``$MCP_HUB_CONFIG``, ``./servers.toml``, ``~/.config/mcp-hub/servers.toml``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("MCP_HUB_CONFIG")
    if env:
        return Path(env)
    for candidate in (Path("servers.toml"), Path.home() / ".config" / "mcp-hub" / "servers.toml"):
        if candidate.is_file():
            return candidate
    return None
