"""The client-facing CLI commands: ``config snippet``, ``install``, ``uninstall``.

All three build the same entry (:func:`mcp_hub.launch.client_entry`): the
absolute ``mcp-hub`` command, ``serve --config`` with the absolute path of the
config found by the usual search order, and the ``env`` PATH its servers need.
Warnings (a command that cannot be found, no config) go to stderr; the JSON of
``config snippet`` alone goes to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mcp_hub import install, launch
from mcp_hub.config import HubConfig, find_config, load_config
from mcp_hub.errors import ConfigError
from mcp_hub.redact import add_secrets

__all__ = ["run_install", "run_snippet", "run_uninstall", "snippet"]


def _config(explicit: str | None) -> tuple[HubConfig | None, Path | None]:
    path = find_config(explicit)
    if path is None:
        return None, None
    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    config = load_config(path)
    add_secrets(config.secret_values)
    return config, path


def _warn(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mcp-hub: warning: {warning}", file=sys.stderr)


def snippet(client: str, *, config_path: str | None, url: str | None, name: str) -> dict[str, Any]:
    """The JSON that registers this hub in ``client``'s MCP configuration (warnings dropped)."""
    path = Path(config_path) if config_path else None
    config = load_config(path) if path is not None and path.is_file() else None
    entry, _ = launch.client_entry(client, config=config, config_path=path, url=url)
    return launch.snippet(client, entry, name)


def run_snippet(args: argparse.Namespace) -> int:
    """``mcp-hub config snippet CLIENT``: print the JSON to paste."""
    config, path = (None, None) if args.url else _config(args.config)
    entry, warnings = launch.client_entry(args.client, config=config, config_path=path,
                                          url=args.url)
    _warn(warnings)
    print(json.dumps(launch.snippet(args.client, entry, args.name), indent=2))
    return 0


def _target(args: argparse.Namespace) -> install.Target:
    return install.target(args.client, file=Path(args.file).expanduser() if args.file else None)


def run_install(args: argparse.Namespace) -> int:
    """``mcp-hub install CLIENT``: write the hub into the client's own config."""
    config, path = (None, None) if args.url else _config(args.config)
    entry, warnings = launch.client_entry(args.client, config=config, config_path=path,
                                          url=args.url)
    _warn(warnings)
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
