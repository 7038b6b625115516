"""``mcp-hub add`` / ``mcp-hub remove``: one ``[servers.NAME]`` entry edited in place.

The file is edited with tomlkit, which keeps every comment, blank line and the
order of the other entries; only the added (or removed) table changes. Before
anything is written the new text is validated with the hub's own models
(:func:`mcp_hub.config.model.parse_config`; an unset ``${VAR}`` counts as empty here,
it is the running hub's business), so a command that would break the config
changes nothing. The previous file is kept as ``NAME.bak`` beside it (one copy,
replaced by the next edit), and the new text replaces the old one atomically
(written to a temporary file in the same folder, flushed, then renamed over it),
so a hub watching the file (``[hub] watch_config``) never reads half a file: it
reloads within a second, connecting the new server or disconnecting the removed one.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from mcp_hub.config.model import SERVER_NAME_RE, HubConfig, parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.plumbing.atomic_files import replace_file

__all__ = ["Edit", "add_server", "remove_server", "server_entry"]


@dataclass(frozen=True)
class Edit:
    """What an edit did: the file, its backup (None: the file is new), the config now."""

    path: Path
    backup: Path | None
    config: HubConfig


class _AnyVariable(Mapping[str, str]):
    """The environment, where a variable that is not set reads as empty (validation only)."""

    def __getitem__(self, key: str) -> str:
        return os.environ.get(key, "")

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(os.environ)

    def __len__(self) -> int:
        return len(os.environ)


def server_entry(
    *, argv: list[str], url: str | None, transport: str | None = None,
    env: Mapping[str, str] | None = None, headers: Mapping[str, str] | None = None,
    cwd: str | None = None, prefix: str | None = None,
) -> dict[str, Any]:
    """The keys of a ``[servers.NAME]`` table, in the order they are written."""
    entry: dict[str, Any] = {}
    if argv:
        entry["command"] = argv[0]
    if argv[1:]:
        entry["args"] = list(argv[1:])
    if url is not None:
        entry["url"] = url
    if transport is not None:
        entry["transport"] = transport
    if cwd is not None:
        entry["cwd"] = cwd
    if prefix is not None:
        entry["prefix"] = prefix
    if env:
        entry["env"] = dict(env)
    if headers:
        entry["headers"] = dict(headers)
    return entry


def _read(path: Path) -> tuple[str, tomlkit.TOMLDocument]:
    try:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    try:
        return text, tomlkit.parse(text)
    except TOMLKitError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _servers(doc: tomlkit.TOMLDocument) -> Any:
    servers = doc.get("servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["servers"] = servers
    return servers


def _inline(value: Any) -> Any:
    """Tables inside a server's entry (``env``, ``headers``) as inline tables: one line each."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update(value)
        return table
    return value


def add_server(path: Path, name: str, entry: Mapping[str, Any], *, replace: bool = False) -> Edit:
    """Write ``[servers.NAME]`` into ``path`` (created when missing); an existing entry of
    that name is kept unless ``replace`` (then it is replaced where it stands)."""
    if not SERVER_NAME_RE.match(name):
        raise ConfigError(f"server name {name!r}: use letters, digits, '_', '-' and '.', "
                          "starting with a letter or digit (at most 64 characters)")
    old, doc = _read(path)
    servers = _servers(doc)
    if name in servers and not replace:
        raise ConfigError(f"{path} already has a server named {name!r}: pick another name, "
                          f"run `mcp-hub remove {name}` first, or pass --replace")
    if name in servers:
        _overwrite(servers[name], entry)
    else:
        table = tomlkit.table()
        for key, value in entry.items():
            table[key] = _inline(value)
        table.add(tomlkit.nl())  # a blank line before whatever table follows
        servers[name] = table
    return _commit(path, old, tomlkit.dumps(doc))


def _overwrite(table: Any, entry: Mapping[str, Any]) -> None:
    """``table`` holding exactly ``entry``: a key kept keeps its place (and comments)."""
    for key in [k for k in table if k not in entry]:
        del table[key]
    for key, value in entry.items():
        table[key] = _inline(value)


def remove_server(path: Path, name: str) -> Edit:
    """Delete ``[servers.NAME]`` (and its sub-tables) from ``path``."""
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    old, doc = _read(path)
    servers = doc.get("servers")
    if servers is None or name not in servers:
        known = ", ".join(sorted(servers)) if servers else "none"
        raise ConfigError(f"{path} has no server named {name!r} (servers: {known})")
    del servers[name]
    return _commit(path, old, tomlkit.dumps(doc))


def _commit(path: Path, old: str, new: str) -> Edit:
    """Validate ``new``, keep ``old`` as ``.bak``, and put ``new`` in place atomically."""
    config = parse_config(new, source=path, environ=_AnyVariable())
    backup = None
    if path.exists():
        backup = path.with_name(path.name + ".bak")
        _atomic_write(backup, old, path)
    _atomic_write(path, new, path)
    return Edit(path=path, backup=backup, config=config)


def _atomic_write(target: Path, text: str, like: Path) -> None:
    """Write ``text`` to ``target`` through a temporary file renamed over it, with the
    permissions of ``like`` (0600 for a new file: configs hold tokens)."""
    try:
        mode = like.stat().st_mode & 0o777
    except OSError:
        mode = 0o600
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, text.encode("utf-8"), prefix=f".{target.name}.", mode=mode)
