"""The client-facing CLI commands: ``config snippet``, ``install``, ``uninstall``.

All three build the same entry (:func:`mcp_hub.clients.launch.client_entry`): the
absolute ``mcp-hub`` command, ``serve --config`` with the absolute path of the
config found by the usual search order, and the ``env`` PATH its servers need.
Warnings (a command that cannot be found, no config) go to stderr; the JSON of
``config snippet`` alone goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_hub.clients import install, launch
from mcp_hub.config.model import HubConfig, find_config, load_config
from mcp_hub.errors import ConfigError
from mcp_hub.redact import add_secrets

__all__ = ["run_install", "run_snippet", "run_uninstall", "snippet"]

# ``${VAR}`` / ``${VAR:-default}`` as servers.toml interpolates them.
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _variables(path: Path) -> list[str]:
    """The ``${VAR}`` references (without a default) in the config's values."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []  # load_config reports it
    names: list[str] = []
    for text in _strings(data):
        for match in _VAR.finditer(text):
            if match.group(1) and match.group(2) is None and match.group(1) not in names:
                names.append(match.group(1))
    return names


def _config(explicit: str | None) -> tuple[HubConfig | None, Path | None, list[str]]:
    """The config found by the search order, its path, and warnings about it."""
    path = find_config(explicit)
    if path is None:
        return None, None, []
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    names = _variables(path)
    # Unset variables only matter to the hub a client starts; here they must not stop us.
    config = load_config(path, environ={**{n: "" for n in names}, **os.environ})
    add_secrets(config.secret_values)
    warnings = [f"{path} reads ${{{n}}} from the hub's environment, which a client does not "
                f"pass on: add \"{n}\" to this entry's \"env\" in the client's config (secrets "
                "are not copied there for you)" for n in names]
    return config, path, warnings


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mcp-hub: warning: {warning}", file=sys.stderr)


def snippet(client: str, *, config_path: str | None, url: str | None, name: str,
            token_env: str | None = None) -> dict[str, Any]:
    """The JSON that registers this hub in ``client``'s MCP configuration (warnings dropped)."""
    path = Path(config_path) if config_path else None
    config = load_config(path) if path is not None and path.is_file() else None
    entry, _ = launch.client_entry(client, config=config, config_path=path, url=url,
                                   token_env=token_env)
    return launch.snippet(client, entry, name)


def run_snippet(args: argparse.Namespace) -> int:
    """``mcp-hub config snippet CLIENT``: print the JSON to paste."""
    config, path, notes = (None, None, []) if args.url else _config(args.config)
    entry, warnings = launch.client_entry(args.client, config=config, config_path=path,
                                          url=args.url, token_env=args.token_env)
    _warn(warnings + notes)
    print(json.dumps(launch.snippet(args.client, entry, args.name), indent=2))
    return 0


def _target(args: argparse.Namespace) -> install.Target:
    return install.target(args.client, file=Path(args.file).expanduser() if args.file else None)


def run_install(args: argparse.Namespace) -> int:
    """``mcp-hub install CLIENT``: write the hub into the client's own config."""
    config, path, notes = (None, None, []) if args.url else _config(args.config)
    entry, warnings = launch.client_entry(args.client, config=config, config_path=path,
                                          url=args.url, token_env=args.token_env)
    _warn(warnings + notes)
    done = install.install(_target(args), args.name, entry, force=args.force,
                           use_cli=not args.file)
    print(f"mcp-hub: {done.message}", file=sys.stderr)
    if done.backup is not None:
        print(f"mcp-hub: the previous file is saved as {done.backup}", file=sys.stderr)
    if done.changed:
        print(f"mcp-hub: restart {install.title(args.client)} (or reload its MCP servers) to "
              "start the hub", file=sys.stderr)
    return 0


def run_uninstall(args: argparse.Namespace) -> int:
    """``mcp-hub uninstall CLIENT``: remove the hub's entry again."""
    done = install.uninstall(_target(args), args.name, use_cli=not args.file)
    print(f"mcp-hub: {done.message}", file=sys.stderr)
    if done.backup is not None:
        print(f"mcp-hub: the previous file is saved as {done.backup}", file=sys.stderr)
    return 0
