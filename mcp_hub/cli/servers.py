"""``mcp-hub add`` and ``mcp-hub remove``: servers added and removed in one command.

``add NAME -- CMD ARGS…`` writes a stdio server, ``add NAME --url URL`` an HTTP
(or, with ``--transport sse``, SSE) one; ``remove NAME`` deletes it. The file is
the one every command finds (``--config``, ``$MCP_HUB_CONFIG``,
``./servers.toml``, ``~/.config/mcp-hub/servers.toml``; ``./servers.toml`` is
created when none exists) and is edited in place by :mod:`mcp_hub.config.edit`.
A hub serving that file picks the change up by itself (``[hub] watch_config``).
Messages go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_hub.config.path import find_config_path as find_config
from mcp_hub.hub_errors import HubError

if TYPE_CHECKING:  # the CLI builds its parser without importing the models
    from mcp_hub.config import edit as config_edit

__all__ = ["add_parsers", "cmd_add", "cmd_remove"]


def _pairs(values: list[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise HubError(f"{flag} {value!r}: write KEY=VALUE")
        out[key] = rest
    return out


def _target(explicit: str | None) -> Path:
    return find_config(explicit) or Path("servers.toml")


def _say(text: str) -> None:
    print(f"mcp-hub: {text}", file=sys.stderr)


def _after(edit: config_edit.Edit) -> None:
    if edit.backup is not None:
        _say(f"the previous file is saved as {edit.backup}")
    if edit.config.hub.watch_config:
        _say("a hub serving this file picks the change up within a second ([hub] watch_config)")
    else:
        _say("[hub] watch_config is off: send the running hub SIGHUP (or restart it) to apply this")


def _warn_missing_command(edit: config_edit.Edit, name: str) -> None:
    from mcp_hub.clients import launch
    from mcp_hub.config import commands

    server = edit.config.servers[name]
    if server.transport != "stdio" or server.command is None:
        return
    if commands.find_command(server.command, launch.child_path(server), server.cwd) is None:
        print(f"mcp-hub: warning: {name}: {commands.not_found_message(server.command)}",
              file=sys.stderr)


def cmd_add(args: argparse.Namespace) -> int:
    """``mcp-hub add NAME -- CMD ARGS…`` / ``mcp-hub add NAME --url URL``."""
    from mcp_hub.config import edit as config_edit
    from mcp_hub.redact import add_secrets

    argv: list[str] = list(args.argv)
    if bool(argv) == bool(args.url):
        raise HubError("give the server's command after `--` (mcp-hub add NAME -- CMD ARGS…) "
                       "or its address with --url URL, not both")
    if args.transport and not args.url:
        raise HubError("--transport is for a server given by --url")
    entry: dict[str, Any] = config_edit.server_entry(
        argv=argv, url=args.url, transport=args.transport, env=_pairs(args.env, "--env"),
        headers=_pairs(args.header, "--header"), cwd=args.cwd, prefix=args.prefix)
    path = _target(args.config)
    edit = config_edit.add_server(path, args.name, entry, replace=args.replace)
    add_secrets(edit.config.secret_values)
    _say(f"{'wrote' if args.replace else 'added'} server {args.name!r} to {path}")
    _warn_missing_command(edit, args.name)
    _after(edit)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """``mcp-hub remove NAME``."""
    from mcp_hub.config import edit as config_edit

    path = find_config(args.config)
    if path is None:
        raise HubError("no servers.toml found (searched $MCP_HUB_CONFIG, ./servers.toml, "
                       "~/.config/mcp-hub/servers.toml); pass --config PATH")
    edit = config_edit.remove_server(path, args.name)
    _say(f"removed server {args.name!r} from {path}")
    _after(edit)
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser, add: Any) -> None:
    """``add`` (whose function is ``add``: the CLI knows it by it) and ``remove``."""
    p = sub.add_parser(
        "add", parents=[common], help="add a server to servers.toml (kept comments and order)",
        description="Add a server: `mcp-hub add NAME -- CMD ARGS…` (stdio) or "
                    "`mcp-hub add NAME --url URL` (Streamable HTTP; --transport sse for SSE).")
    p.add_argument("name", help="the server's name (its tools are named NAME_TOOL)")
    p.add_argument("argv", nargs="*", metavar="-- CMD ARGS",
                   help="the command that starts a stdio server, after `--`")
    p.add_argument("--url", help="the address of an HTTP or SSE server")
    p.add_argument("--transport", choices=["http", "sse"], help="for --url (default: http)")
    p.add_argument("--env", action="append", metavar="KEY=VALUE",
                   help="an environment variable for the server (repeat; ${VAR} is read "
                        "from the hub's environment)")
    p.add_argument("--header", action="append", metavar="KEY=VALUE",
                   help="an HTTP header for a --url server (repeat)")
    p.add_argument("--cwd", help="the folder a stdio server runs in")
    p.add_argument("--prefix", help="the prefix of its tool names (default: NAME)")
    p.add_argument("--replace", action="store_true",
                   help="replace a server of the same name (where it stands)")
    p.set_defaults(func=add)
    p = sub.add_parser("remove", parents=[common], help="remove a server from servers.toml")
    p.add_argument("name")
    p.set_defaults(func=cmd_remove)


