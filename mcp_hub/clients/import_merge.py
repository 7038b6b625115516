"""What ``mcp-hub import`` leaves out, and how ``--update`` refreshes entries in place.

Two kinds of client entries are not imported:

* **The hub's own entry** (``mcp-hub install`` wrote it, or a bridge to the hub's
  own URL): imported, the hub would start itself, which starts itself again.
  An entry is the hub's when its command is ``mcp-hub``, runs ``-m mcp_hub``, is a
  launcher (``uvx``, ``pipx``, ``npx``) of the ``mcp-hub`` package, or when its URL
  (or a URL argument, as ``mcp-remote URL`` has) is the hub's own loopback
  address.
* **Entries already present** in the target ``servers.toml``: the same name, or
  the same command line or URL under another name. Importing twice adds nothing;
  ``--update`` replaces each such ``[servers.NAME]`` table (its sub-tables
  included) where it stands, every other line of the file kept as it was.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from itertools import pairwise
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HubAddress", "is_hub_entry", "replace_server_tables", "same_server"]

_LAUNCHERS = frozenset({"uvx", "pipx", "npx", "uv"})
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "[::1]"})
_HEADER = re.compile(r"^\s*\[\[?(?P<key>[^\[\]]+)\]\]?\s*(?:#.*)?$")


class HubAddress:
    """The hub's own HTTP address (host and port of ``[hub.http]``)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8765) -> None:
        self.host = host
        self.port = port

    @classmethod
    def of_config(cls, data: Mapping[str, Any]) -> HubAddress:
        """From a parsed ``servers.toml`` (defaults where unset)."""
        hub = data.get("hub")
        http = hub.get("http") if isinstance(hub, dict) else None
        http = http if isinstance(http, dict) else {}
        host, port = http.get("host", "127.0.0.1"), http.get("port", 8765)
        return cls(host if isinstance(host, str) else "127.0.0.1",
                   port if isinstance(port, int) else 8765)

    def serves(self, url: str) -> bool:
        """Whether ``url`` points at this hub on this machine."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or parts.hostname is None:
            return False
        return port == self.port and (parts.hostname in _LOOPBACK or parts.hostname == self.host)


def _program(command: str) -> str:
    name = os.path.basename(command.replace("\\", "/")).lower()
    for suffix in (".exe", ".cmd", ".bat"):
        name = name.removesuffix(suffix)
    return name


def is_hub_entry(entry: Mapping[str, Any], hub: HubAddress) -> bool:
    """Whether a client's entry starts or reaches the hub itself."""
    command = entry.get("command")
    raw_args = entry.get("args")
    args = [a for a in raw_args if isinstance(a, str)] if isinstance(raw_args, list) else []
    url = entry.get("url") or entry.get("serverUrl")
    if isinstance(url, str) and hub.serves(url):
        return True
    if not isinstance(command, str):
        return False
    program = _program(command)
    if program == "mcp-hub":
        return True
    if any(a == "-m" and b in ("mcp_hub", "mcp_hub.__main__") for a, b in pairwise(args)):
        return True
    if program in _LAUNCHERS and any(a.split("@")[0].split("==")[0] == "mcp-hub" for a in args):
        return True
    return any(hub.serves(a) for a in args)


def _transport(table: Mapping[str, Any]) -> tuple[Any, ...] | None:
    if table.get("command"):
        return ("command", table.get("command"), tuple(table.get("args") or ()))
    if table.get("url"):
        return ("url", str(table.get("url")).rstrip("/"))
    return None


def same_server(new: Mapping[str, Any], existing: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The name in ``existing`` that runs the same command line or URL as ``new``."""
    mine = _transport(new)
    if mine is None:
        return None
    for name, table in existing.items():
        if isinstance(table, dict) and _transport(table) == mine:
            return name
    return None


def _header_path(line: str) -> tuple[str, ...] | None:
    """The key path of a TOML table header line (``[servers."a.b".env]``), or None."""
    match = _HEADER.match(line)
    if match is None:
        return None
    try:
        data: Any = tomllib.loads(f"[{match.group('key')}]\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        key = next(iter(data))
        path.append(key)
        data = data[key]
    return tuple(path)


def replace_server_tables(text: str, blocks: Mapping[str, str]) -> tuple[str, list[str]]:
    """``text`` with each ``[servers.NAME]`` table (and its sub-tables) replaced by
    ``blocks[NAME]``; returns the new text and the names it could not find as tables."""
    lines = text.splitlines(keepends=True)
    owner: list[str | None] = []
    current: str | None = None
    for line in lines:
        path = _header_path(line)
        if path is not None:
            current = path[1] if len(path) >= 2 and path[0] == "servers" else None
        owner.append(current)
        if path is not None:
            _keep_lead_in(lines, owner)
    out: list[str] = []
    written: set[str] = set()
    for line, name in zip(lines, owner, strict=True):
        if name is None or name not in blocks:
            out.append(line)
        elif name not in written:
            written.add(name)
            out.append(blocks[name].rstrip("\n") + "\n")
    return "".join(out), [name for name in blocks if name not in written]


def _keep_lead_in(lines: list[str], owner: list[str | None]) -> None:
    """The blank and comment lines just above the header last added belong to no table:
    a comment written over the next table stays, whatever is replaced above it."""
    j = len(owner) - 2
    while j >= 0 and (not lines[j].strip() or lines[j].lstrip().startswith("#")):
        owner[j] = None
        j -= 1
