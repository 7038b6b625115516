"""``mcp-hub import CLIENT [PATH] [-o servers.toml] [--update]``.

The servers of a client's MCP config become ``servers.toml`` tables
(:mod:`mcp_hub.clients.importer`). The target — ``-o``, or else the config the hub would
use — decides what is left out: the hub's own entry (its ``[hub.http]`` address
tells a bridge to the hub apart) and servers the target has already. With ``-o``
new tables are appended and, with ``--update``, present ones are replaced where
they stand; the file is written whole to a temporary file beside it and moved
into place, so a reader never sees half of it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from mcp_hub.clients.import_merge import HubAddress, replace_server_tables
from mcp_hub.clients.importer import Imported, import_servers
from mcp_hub.config.path import find_config_path
from mcp_hub.errors import ConfigError

__all__ = ["run_import"]


def _read_target(path: Path | None) -> tuple[str, dict[str, Any]]:
    """The target's text and parsed data (empty when there is none yet)."""
    if path is None or not path.exists():
        return "", {}
    text = path.read_text(encoding="utf-8")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _merged(text: str, done: Imported) -> str:
    """``text`` with the refreshed tables in place and the new ones appended."""
    merged, missing = replace_server_tables(text, done.updates)
    for name in missing:  # not a [servers.NAME] table of its own (an inline table)
        print(f"mcp-hub: warning: {name}: not written as a [servers.{name}] table in the "
              "target; left as it is", file=sys.stderr)
    if done.new:
        added = "\n".join(done.head) + "\n\n" + "\n\n".join(done.new) + "\n"
        merged = merged + ("\n" if merged and not merged.endswith("\n\n") else "") + added
    return merged


def _write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` at once (same folder, same permissions)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def run_import(args: argparse.Namespace) -> int:
    """Print or write the converted servers; say what was left out and why."""
    target = Path(args.output) if args.output else None
    reference = target if target is not None else find_config_path(args.config)
    text, data = _read_target(reference)
    servers = data.get("servers")
    existing = servers if isinstance(servers, dict) else {}
    done = import_servers(args.client, Path(args.path) if args.path else None,
                          existing=existing, hub=HubAddress.of_config(data),
                          update=args.update)
    for warning in done.warnings:
        print(f"mcp-hub: warning: {warning}", file=sys.stderr)
    if target is None:
        sys.stdout.write(done.text())
        return 0
    if not done.new and not done.updates:
        print(f"mcp-hub: nothing to add to {target}", file=sys.stderr)
        return 0
    merged = _merged(text if target.exists() else "", done)
    try:
        tomllib.loads(merged)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - a bug, said plainly
        raise ConfigError(f"{target}: the merged file would not be valid TOML ({exc}); "
                          "left unchanged") from None
    _write(target, merged)
    parts = [f"{len(done.new)} added"] + ([f"{len(done.updates)} refreshed"] if done.updates
                                          else [])
    print(f"mcp-hub: {', '.join(parts)} in {target}", file=sys.stderr)
    return 0
