"""Turn an MCP client's JSON configuration into ``servers.toml`` entries.

``mcp-hub import claude-desktop|cursor|vscode [PATH]`` moves a user's servers
behind the hub in one step. The three clients' formats:

* Claude Desktop — ``{"mcpServers": {NAME: {"command", "args", "env"}}}`` in
  ``claude_desktop_config.json`` (Linux ``~/.config/Claude/``, macOS
  ``~/Library/Application Support/Claude/``, Windows ``%APPDATA%\\Claude\\``).
* Cursor — the same ``mcpServers`` shape plus remote entries
  (``"url"``, ``"headers"``, optional ``"type"``), in ``.cursor/mcp.json`` of the
  project or ``~/.cursor/mcp.json``; values may use ``${env:NAME}``,
  ``${userHome}``, ``${workspaceFolder}``.
* VS Code — ``{"servers": {NAME: {"type": "stdio"|"http"|"sse", ...}},
  "inputs": [...]}`` in ``.vscode/mcp.json`` (or the user-level ``mcp.json``, or
  the ``"mcp"`` key of ``settings.json``); JSON with comments; values may use
  ``${input:ID}`` (a prompt the editor shows) and the variables above.

Decisions (each one reported as a warning where it changes something):

* Server names are sanitised to ``[A-Za-z0-9_.-]`` (starting with a letter or
  digit, at most 64 characters); clashes within the client's file get ``-2``,
  ``-3`` … suffixes.
* The hub's own entry and servers the target ``servers.toml`` has already are
  not imported (``--update`` refreshes the latter; :mod:`mcp_hub.clients.import_merge`).
* Literal secrets are never copied into the TOML. An env value, header, URL query
  parameter or command-line flag value that looks like a secret (by its name —
  ``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*`` … — or by its shape —
  ``ghp_…``, ``sk-…``, ``xoxb-…``, ``AKIA…``, long random strings) becomes a
  ``${VAR}`` reference that the hub interpolates from its own environment.
* ``${input:ID}`` becomes ``${ID}`` (upper-cased, non-alphanumerics → ``_``):
  the hub has no prompt, so the value comes from its environment instead.
  ``${env:NAME}`` becomes ``${NAME}``; ``${userHome}`` and ``${workspaceFolder}``
  are expanded when they can be (the workspace is the folder holding
  ``.vscode/`` or ``.cursor/``), otherwise they become ``${USER_HOME}`` /
  ``${WORKSPACE_FOLDER}``.
* Disabled servers (``"disabled": true``) are imported with ``enabled = false``.
* ``envFile`` and client-only keys (``autoApprove``, ``alwaysAllow``, ``gallery``…)
  are not carried over; a warning names them.
* A remote entry without a type is Streamable HTTP unless its URL path ends in
  ``/sse`` (the legacy SSE convention).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp_hub.clients.import_merge import HubAddress, is_hub_entry, same_server
from mcp_hub.clients.import_sources import (
    CLIENTS,
    default_config_paths,
    load_json,
    servers_of,
    workspace_of,
)
from mcp_hub.clients.import_values import (
    ENV_NAME,
    Client,
    ImportContext,
    convert_args,
    convert_header,
    convert_url,
    convert_vars,
    env_var_name,
    guard_secret,
    toml_key,
    toml_list,
    toml_str,
)
from mcp_hub.errors import ConfigError

__all__ = ["CLIENTS", "Client", "Imported", "default_config_paths", "import_client_config",
           "import_servers"]

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_CLIENT_ONLY_KEYS = frozenset({
    "autoApprove", "alwaysAllow", "disabledTools", "gallery", "version", "description",
    "timeout", "dev", "icon", "transportType", "oauth", "auth",
})


_KNOWN_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "type", "transport",
                         "disabled", "enabled", "envFile"})


_TYPE_MAP: dict[str, str] = {
    "stdio": "stdio", "http": "http", "streamable-http": "http", "streamablehttp": "http",
    "streamable_http": "http", "sse": "sse",
}


def _sanitise_name(name: str, taken: set[str]) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip())
    clean = re.sub(r"^[^A-Za-z0-9]+", "", clean)[:64] or "server"
    candidate, n = clean, 2
    while candidate.lower() in taken:
        suffix = f"-{n}"
        candidate = clean[: 64 - len(suffix)] + suffix
        n += 1
    taken.add(candidate.lower())
    return candidate


def _str_list(value: Any, where: str, ctx: ImportContext) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        ctx.warnings.append(f"{where}: expected a list; ignored")
        return []
    return [v if isinstance(v, str) else json.dumps(v) for v in value]


def _str_map(value: Any, where: str, ctx: ImportContext) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        ctx.warnings.append(f"{where}: expected an object; ignored")
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        if v is None:
            continue
        out[str(k)] = v if isinstance(v, str) else json.dumps(v) if not isinstance(
            v, bool) else str(v).lower()
    return out


def _server_block(raw_name: str, entry: Any, name: str, ctx: ImportContext) -> list[str] | None:
    where = f"{raw_name}"
    if not isinstance(entry, dict):
        ctx.warnings.append(f"{where}: not an object; skipped")
        return None
    lines = [f"[servers.{toml_key(name)}]"]
    ctx.disabled = entry.get("disabled") is True or entry.get("enabled") is False
    transport = _transport_lines(entry, name, where, ctx)
    if transport is None:
        return None
    lines += transport
    command = bool(entry.get("command"))
    if ctx.disabled:
        lines.append("enabled = false")
        ctx.warnings.append(f"{where}: disabled in {ctx.client}; imported with enabled = false "
                            "(its ${VAR:-} references need setting before you enable it)")
    if entry.get("envFile"):
        ctx.warnings.append(f"{where}: envFile {entry['envFile']!r} is not read by the hub; "
                            "put its variables in the hub's environment or in env")
    _note_ignored_keys(entry, where, ctx)
    lines += _env_lines(entry, name, where, ctx, command=command)
    lines += _header_lines(entry, name, where, ctx, remote=not command)
    return lines


def _transport_lines(entry: dict[str, Any], name: str, where: str, ctx: ImportContext
                     ) -> list[str] | None:
    """``command``/``args``/``cwd`` or ``url``/``transport``; None when the entry is skipped."""
    kind_raw = entry.get("type", entry.get("transport"))
    kind = _TYPE_MAP.get(str(kind_raw).lower().replace(" ", "")) if kind_raw else None
    if kind_raw and kind is None:
        ctx.warnings.append(f"{where}: unknown type {kind_raw!r}; guessed from the entry")
    command = entry.get("command")
    url = entry.get("url") or entry.get("serverUrl")
    if command and url:
        ctx.warnings.append(f"{where}: has both 'command' and 'url'; kept the command")
        url = None
    if not command and not url:
        ctx.warnings.append(f"{where}: neither 'command' nor 'url'; skipped")
        return None
    lines: list[str] = []
    if command:
        if not isinstance(command, str):
            ctx.warnings.append(f"{where}: 'command' is not a string; skipped")
            return None
        lines.append(f"command = {toml_str(convert_vars(command, where + '.command', ctx))}")
        args = convert_args(_str_list(entry.get("args"), where + ".args", ctx), name, where,
                            ctx)
        if args:
            lines.append(f"args = {toml_list(args)}")
        if isinstance(entry.get("cwd"), str) and entry["cwd"]:
            lines.append(f"cwd = {toml_str(convert_vars(entry['cwd'], where + '.cwd', ctx))}")
        if kind not in (None, "stdio"):
            ctx.warnings.append(f"{where}: type {kind_raw!r} with a command; imported as stdio")
        return lines
    if not isinstance(url, str):
        ctx.warnings.append(f"{where}: 'url' is not a string; skipped")
        return None
    if kind in (None, "stdio"):
        kind = "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "http"
    lines.append(f"url = {toml_str(convert_url(url, name, where + '.url', ctx))}")
    lines.append(f"transport = {toml_str(kind)}")
    return lines


def _note_ignored_keys(entry: dict[str, Any], where: str, ctx: ImportContext) -> None:
    ignored = sorted(k for k in entry if k not in _KNOWN_KEYS and k != "serverUrl")
    if ignored:
        client_only = [k for k in ignored if k in _CLIENT_ONLY_KEYS]
        other = [k for k in ignored if k not in _CLIENT_ONLY_KEYS]
        if client_only:
            ctx.warnings.append(f"{where}: client-only settings not carried over: "
                                f"{', '.join(client_only)}")
        if other:
            ctx.warnings.append(f"{where}: unknown keys ignored: {', '.join(other)}")


def _env_lines(entry: dict[str, Any], name: str, where: str, ctx: ImportContext, *,
               command: bool) -> list[str]:
    """``[servers.NAME.env]``: each value kept, or a ``${VAR}`` in place of a secret."""
    def value(key: str, raw: str, w: str) -> str:
        var = key if ENV_NAME.match(key) else env_var_name(name, key)
        return guard_secret(key, raw, var, w, ctx)

    return _map_table(entry, "env", name, where, ctx, value,
                      applies=command, misfit="a remote server")


def _header_lines(entry: dict[str, Any], name: str, where: str, ctx: ImportContext, *,
                  remote: bool) -> list[str]:
    """``[servers.NAME.headers]``: each value through :func:`convert_header`."""
    def value(key: str, raw: str, w: str) -> str:
        return convert_header(key, raw, name, w, ctx)

    return _map_table(entry, "headers", name, where, ctx, value,
                      applies=remote, misfit="a stdio server")


def _map_table(entry: dict[str, Any], key: str, name: str, where: str, ctx: ImportContext,
               value: Callable[[str, str, str], str], *, applies: bool, misfit: str
               ) -> list[str]:
    """The ``[servers.NAME.KEY]`` table of the entry's string map ``KEY``, each value
    through ``value(key, raw, where)``; nothing (and a warning if the map is there) when
    ``KEY`` does not apply to this kind of server, ``misfit``."""
    values = _str_map(entry.get(key), f"{where}.{key}", ctx)
    if values and not applies:
        ctx.warnings.append(f"{where}: {key!r} has no meaning for {misfit}; ignored")
    if not values or not applies:
        return []
    lines = ["", f"[servers.{toml_key(name)}.{key}]"]
    for k, raw in values.items():
        lines.append(f"{toml_key(k)} = {toml_str(value(k, raw, f'{where}.{key}.{k}'))}")
    return lines


@dataclass
class Imported:
    """What one import produced: new tables, tables to refresh, and the words about them."""

    source: Path
    head: list[str]
    #: ``[servers.NAME]`` tables of servers not in the target yet, in the client's order.
    new: list[str] = field(default_factory=list)
    #: Replacement tables of servers already in the target, by their name there (``--update``).
    updates: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The header comment and every table, new and refreshed: valid TOML on its own."""
        blocks = [*self.new, *self.updates.values()]
        head = self.head if blocks else [*self.head, "# (no servers to import)"]
        return "\n".join(head) + "\n\n" + "\n\n".join(blocks) + ("\n" if blocks else "")


def import_client_config(
    client: Client,
    path: Path | None = None,
    *,
    existing_names: Collection[str] = (),
    platform: str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, list[str]]:
    """Read ``client``'s MCP config and return ``(servers.toml text, warnings)``.

    ``path`` defaults to the first existing file of :func:`default_config_paths`.
    ``existing_names`` are server names already in the target ``servers.toml``;
    those servers are not imported again. Raises
    :class:`~mcp_hub.errors.ConfigError` when no file is found or it is not a
    config of that client.
    """
    done = import_servers(client, path, existing={n: {} for n in existing_names},
                          platform=platform, home=home, cwd=cwd, environ=environ)
    return done.text(), done.warnings


def import_servers(
    client: Client,
    path: Path | None = None,
    *,
    existing: Mapping[str, Mapping[str, Any]] | None = None,
    hub: HubAddress | None = None,
    update: bool = False,
    platform: str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Imported:
    """Read ``client``'s MCP config and convert its servers (see the module docstring).

    ``existing`` holds the target's ``[servers]`` tables by name: a server already
    there (by name, or by the same command line or URL) is skipped with a warning,
    or, with ``update``, converted under its name there into :attr:`Imported.updates`.
    The hub's own entry (``hub``: its address) is always skipped.
    """
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    home = Path.home() if home is None else home
    existing = {} if existing is None else existing
    hub = HubAddress() if hub is None else hub
    warnings: list[str] = []
    if path is None:
        path = _default_path(client, warnings, platform=platform, home=home, cwd=cwd,
                             environ=environ)
    data = load_json(path)
    servers, raw_inputs = servers_of(client, data, path)
    inputs = {str(i.get("id")): i for i in raw_inputs if isinstance(i, dict) and i.get("id")}
    ctx = ImportContext(client=client, source=path, home=home, workspace=workspace_of(client, path, home),
               inputs=inputs, warnings=warnings)
    present = {n.lower(): n for n in existing}
    taken = set(present)
    done = Imported(source=path, head=[], warnings=warnings)
    for raw_name, entry in servers.items():
        if isinstance(entry, dict) and is_hub_entry(entry, hub):
            warnings.append(f"{raw_name}: this is the hub itself; not imported")
            continue
        name = _sanitise_name(str(raw_name), taken)
        there = present.get(_sanitise_name(str(raw_name), set()).lower())
        said, needed = len(warnings), dict(ctx.needed_vars)
        block = _server_block(str(raw_name), entry, there or name, ctx)
        if block is None:
            taken.discard(name.lower())
            continue
        text = "\n".join(block)
        found = there or same_server(_table(text), existing)
        if found is not None:
            taken.discard(name.lower())
            if update and found == there:
                done.updates[found] = text
            elif update:
                refreshed = _server_block(str(raw_name), entry, found, ctx)
                if refreshed is not None:
                    done.updates[found] = "\n".join(refreshed)
            else:  # what converting it said is about a server not imported: forget it
                del warnings[said:]
                ctx.needed_vars.clear()
                ctx.needed_vars.update(needed)
                warnings.append(f"{raw_name}: already in servers.toml as {found!r}; not "
                                "imported again (--update refreshes it)")
            continue
        if name != raw_name:
            warnings.append(f"server {raw_name!r} imported as {name!r} (names use "
                            "letters, digits, '_', '.', '-' and must be unique)")
        done.new.append(text)
    done.head = [f"# Imported from {client}: {path}"]
    if ctx.needed_vars:
        done.head.append("# The hub reads these from its environment (set them before it starts):")
        for var, why in ctx.needed_vars.items():
            done.head.append(f"#   {var}  ({why})")
    _self_check(done.text(), path)
    return done


def _default_path(client: Client, warnings: list[str], **where: Any) -> Path:
    candidates = default_config_paths(client, **where)
    found = [p for p in candidates if p.is_file()]
    if not found:
        tried = ", ".join(str(p) for p in candidates)
        raise ConfigError(f"no {client} MCP configuration found (looked at {tried}); "
                          "pass its path")
    for other in found[1:]:
        warnings.append(f"also found {other}; import it with: mcp-hub import {client} {other}")
    return found[0]


def _table(block: str) -> dict[str, Any]:
    """The one ``[servers.NAME]`` table of a converted block, parsed."""
    servers = tomllib.loads(block).get("servers", {})
    return next(iter(servers.values()), {}) if isinstance(servers, dict) else {}


def _self_check(text: str, path: Path) -> None:
    """The output must be TOML the hub accepts; a failure here is a bug, said plainly."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - guarded by tests
        raise ConfigError(f"{path}: could not be converted to valid TOML ({exc}); "
                          "please report this") from None
