"""Finding and reading an MCP client's configuration file (JSON with comments).

Where each client keeps its config, how to read JSONC, and where the server
table sits in each client's format.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_hub.clients.import_values import Client
from mcp_hub.errors import ConfigError

__all__ = ["CLIENTS", "default_config_paths", "load_json", "servers_of", "workspace_of"]

CLIENTS: tuple[Client, ...] = ("claude-desktop", "cursor", "vscode")


def default_config_paths(
    client: Client,
    *,
    platform: str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Path]:
    """Where ``client`` keeps its MCP configuration, most specific first."""
    plat = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    env = os.environ if environ is None else environ
    if plat == "darwin":
        app_support = home / "Library" / "Application Support"
    elif plat.startswith("win"):
        app_support = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        app_support = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "claude-desktop":
        return [app_support / "Claude" / "claude_desktop_config.json"]
    if client == "cursor":
        return [cwd / ".cursor" / "mcp.json", home / ".cursor" / "mcp.json"]
    if client == "vscode":
        return [cwd / ".vscode" / "mcp.json", app_support / "Code" / "User" / "mcp.json"]
    raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


def _strip_jsonc(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments and trailing commas outside strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "]}":
                i += 1  # trailing comma
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from None


def servers_of(client: Client, data: Any, path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The server table and VS Code ``inputs`` of a parsed client config."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    inputs: list[Any] = []
    if client == "vscode":
        mcp_key = data.get("mcp")
        body: dict[str, Any] = mcp_key if isinstance(mcp_key, dict) else data
        servers = body.get("servers")
        if servers is None and "mcpServers" in body:
            servers = body["mcpServers"]
        inputs = body.get("inputs") or []
    else:
        servers = data.get("mcpServers")
        if servers is None and "servers" in data:
            servers = data["servers"]
    if servers is None:
        key = "servers" if client == "vscode" else "mcpServers"
        raise ConfigError(f"{path}: no {key!r} object: is this a {client} MCP configuration?")
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: the server list must be a JSON object of NAME: entry")
    return servers, inputs if isinstance(inputs, list) else []


def workspace_of(client: Client, path: Path, home: Path) -> Path | None:
    """The project folder of a project-level config (``PROJECT/.vscode/mcp.json``)."""
    parent = path.resolve().parent
    if client == "vscode" and parent.name == ".vscode":
        return parent.parent
    if client == "cursor" and parent.name == ".cursor" and parent.parent != home.resolve():
        return parent.parent
    return None
