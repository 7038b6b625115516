"""How a client starts the hub, and what the hub's stdio servers will see.

``mcp-hub config snippet`` and ``mcp-hub install`` write an entry that a client
runs with its own environment — for a desktop app a bare ``PATH=/usr/bin:/bin``
and the working directory ``/``. So the entry carries everything the hub needed
in the user's shell: the absolute path of the ``mcp-hub`` script, an absolute
``--config``, and an ``env`` whose ``PATH`` holds the folders of the configured
commands (and of the programs their ``#!/usr/bin/env`` lines name) as found now,
followed by the standard system folders. Folders the hub adds by itself
(``[hub] path``, its own ``bin``) are left out. A command that cannot be found
now becomes a warning.

``mcp-hub check`` prints :func:`child_path_lines`: the PATH each stdio child gets.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_hub.config import commands
from mcp_hub.config.model import HubConfig, ServerConfig
from mcp_hub.errors import HubError
from mcp_hub.upstream.stdio.prespawn import filtered_environment

__all__ = [
    "CLIENTS",
    "SYSTEM_PATH",
    "Needs",
    "child_path",
    "child_path_lines",
    "client_entry",
    "connect_hint",
    "hub_command",
    "needs",
    "shell_command",
    "snippet",
]

#: The clients whose configuration the hub can write.
CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")
#: Folders every snippet PATH ends with, so servers still find git, node from packages …
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")


def child_path(server: ServerConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The PATH a stdio child of ``server`` gets when the hub runs with ``environ``."""
    env = server.search_path.apply(filtered_environment(server.env, environ))
    return env.get("PATH")


def child_path_lines(config: HubConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Lines naming the PATH of every enabled stdio server (grouped when they share one)."""
    groups: dict[str, list[str]] = {}
    for name, server in config.enabled_servers().items():
        if server.transport == "stdio":
            groups.setdefault(child_path(server, environ) or "(unset)", []).append(name)
    if len(groups) == 1:
        return [f"PATH of stdio servers: {next(iter(groups))}"]
    return [f"PATH of {', '.join(names)}: {path}" for path, names in groups.items()]


@dataclass
class Needs:
    """The folders the hub's own PATH must hold for every command to be found."""

    dirs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stdio_servers: int = 0


def _need(out: Needs, folder: str, covered: set[str]) -> None:
    if folder not in covered and folder not in out.dirs:
        out.dirs.append(folder)


def needs(config: HubConfig, environ: Mapping[str, str] | None = None) -> Needs:
    """Find each stdio command now (as the hub would with ``environ``) and note its folder."""
    out = Needs()
    for name, server in config.enabled_servers().items():
        if server.transport != "stdio" or server.command is None:
            continue
        out.stdio_servers += 1
        path = child_path(server, environ)
        found = commands.find_command(server.command, path, server.cwd)
        if found is None:
            out.warnings.append(f"server {name!r}: {commands.not_found_message(server.command)}")
            continue
        # A server with its own env.PATH does not use the hub's PATH at all.
        covered = {*server.search_path.before, *server.search_path.after}
        own_path = "PATH" in server.env
        full = found if os.path.isabs(found) else os.path.abspath(
            os.path.join(server.cwd or os.getcwd(), found))
        if not own_path and os.sep not in server.command:
            _need(out, os.path.dirname(full), covered)
        program = commands.shebang_program(full)
        if program is None:
            continue
        interpreter = shutil.which(program, path=path)
        if interpreter is None:
            out.warnings.append(f"server {name!r}: {full} runs {program!r}, which is not on "
                                "the child's PATH")
        elif not own_path:
            _need(out, os.path.dirname(os.path.abspath(interpreter)), covered)
    return out


def hub_command() -> list[str]:
    """The absolute command line that starts this installation of the hub."""
    script = "mcp-hub.exe" if sys.platform == "win32" else "mcp-hub"
    beside = os.path.join(commands.hub_bin_dir(), script)
    if os.path.isfile(beside):
        return [beside]
    found = shutil.which("mcp-hub")
    if found:
        return [os.path.abspath(found)]
    return [sys.executable, "-m", "mcp_hub"]


def shell_command() -> str:
    """How to type this installation's ``mcp-hub`` in a shell here: ``mcp-hub`` when PATH
    finds this very script, else its path (relative when it is under the current folder)."""
    argv = hub_command()
    if len(argv) > 1:
        return " ".join(shlex.quote(a) for a in argv)
    script = argv[0]
    found = shutil.which("mcp-hub")
    try:
        if found and os.path.samefile(found, script):
            return "mcp-hub"
    except OSError:
        pass
    shown = os.path.relpath(script)
    if shown.startswith(".."):
        shown = script
    return shlex.quote(shown)


def connect_hint(url: str, config_path: Path | None, *, tokens: bool) -> list[str]:
    """The lines the HTTP hub prints at start: commands that register it in each client,
    as they can be typed here (with ``--token-env`` when the hub asks for a token)."""
    cmd = shell_command()
    config = f" --config {shlex.quote(str(config_path.resolve()))}" if config_path else ""
    token = " --token-env MCP_HUB_TOKEN" if tokens else ""
    lines = [
        "connect a client (each command writes the client's config, backed up first; "
        "`config snippet` instead of `install` prints it to paste):",
        f"  {cmd} install claude-code --url {url}{token}",
        f"  {cmd} install cursor --url {url}{token}",
        f"  {cmd} install vscode --url {url}{token}",
        f"  {cmd} install claude-desktop{config}",
        "  (Claude Desktop starts a hub of its own over stdio; docs/clients.md)",
    ]
    if cmd != "mcp-hub" and os.path.isfile(os.path.join(commands.hub_bin_dir(), "activate")):
        activate = shlex.quote(os.path.join(os.path.dirname(shlex.split(cmd)[0]), "activate"))
        lines.append(f"  (`. {activate}` puts mcp-hub on this shell's PATH)")
    return lines


def _snippet_path(found: Needs, environ: Mapping[str, str]) -> str:
    if sys.platform == "win32":
        rest = environ.get("PATH", "").split(os.pathsep)
    else:
        rest = list(SYSTEM_PATH)
    return commands.SearchPath(tuple(found.dirs)).path(os.pathsep.join(rest)) or ""


#: How each client writes "the value of environment variable NAME" in its config file.
_ENV_REFERENCE = {"claude-code": "${{{}}}", "cursor": "${{env:{}}}", "vscode": "${{env:{}}}"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _url_entry(client: str, url: str, token_env: str | None,
               env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The entry of a running HTTP hub; with ``token_env``, a bearer token the client
    reads from that environment variable itself (the token is never written)."""
    if client == "claude-desktop":
        raise HubError("Claude Desktop's config file only starts local (stdio) servers (a URL "
                       "is added under Settings > Connectors, from Anthropic's cloud): leave "
                       "out --url (it starts its own hub), or bridge to the running hub with "
                       "mcp-remote (docs/clients.md, \"A running hub from a stdio-only client\")")
    entry: dict[str, Any] = {"url": url} if client == "cursor" else {"type": "http", "url": url}
    warnings: list[str] = []
    if token_env is not None:
        if not _ENV_NAME.match(token_env):
            raise HubError(f"--token-env {token_env!r}: give the name of an environment "
                           "variable (e.g. MCP_HUB_TOKEN), not the token")
        reference = _ENV_REFERENCE[client].format(token_env)
        entry["headers"] = {"Authorization": f"Bearer {reference}"}
        if token_env not in env:
            warnings.append(f"{token_env} is not set here; the client reads it from the "
                            "environment it is started in")
    return entry, warnings


def client_entry(
    client: str, *, config: HubConfig | None, config_path: Path | None, url: str | None,
    environ: Mapping[str, str] | None = None, token_env: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The client's entry for the hub (stdio unless ``url``) and warnings about it."""
    if client not in CLIENTS:
        raise HubError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    env = os.environ if environ is None else environ
    if url:
        return _url_entry(client, url, token_env, env)
    if token_env is not None:
        raise HubError("--token-env goes with --url: a hub the client starts over stdio "
                       "needs no token")
    warnings: list[str] = []
    argv = hub_command()
    args = [*argv[1:], "serve"]
    if config_path is not None:
        args += ["--config", str(config_path.resolve())]
    else:
        warnings.append("no servers.toml found (searched $MCP_HUB_CONFIG, ./servers.toml, "
                        "~/.config/mcp-hub/servers.toml): the client would start the hub with "
                        "no upstream servers; pass --config PATH")
    entry: dict[str, Any] = {"command": argv[0], "args": args}
    if config is not None:
        found = needs(config, env)
        warnings += found.warnings
        if found.stdio_servers:
            entry["env"] = {"PATH": _snippet_path(found, env)}
    if client in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    return entry, warnings


def snippet(client: str, entry: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The JSON document that registers ``entry`` as ``name`` in ``client``'s config."""
    key = "servers" if client == "vscode" else "mcpServers"
    return {key: {name: dict(entry)}}
