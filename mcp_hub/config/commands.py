"""Finding a stdio upstream's command without depending on the caller's shell.

A desktop client starts the hub with a bare environment (``PATH=/usr/bin:/bin``)
and the working directory ``/``; a config that only worked because ``make`` or
an activated virtualenv put things on ``PATH`` then finds nothing. So the PATH a
stdio child gets, and where its command is looked up, is built here and only
here — by the upstream transport and by the early start (:mod:`mcp_hub.upstream.stdio.prespawn`)
alike, so that both compute the very same command line and environment:

* A server's own ``path`` entries come first (``[servers.NAME] path``: what
  only that server needs, such as a bundled Node, so it shadows nothing for the
  others), then ``[hub] path`` entries, then the child's own ``PATH`` (its ``env``
  value, or the one inherited from the hub), then the hub's own ``bin``
  directory (where the ``mcp-hub`` script lives) unless ``hub_bin_on_path`` is
  false — so servers installed beside the hub are always found.
* A ``command``, ``cwd`` or argument that starts with ``./`` or ``../`` is a
  path relative to the config file: ``cwd`` resolves against the config file's
  directory, ``command`` and ``args`` against the server's ``cwd`` when it is set
  (where the child runs) and the config file's directory otherwise. An argument
  ``--flag=./x`` resolves the part after ``=``.

Standard library only: the early start imports this before anything heavy.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "RELATIVE_PREFIXES",
    "SearchPath",
    "find_command",
    "hub_bin_dir",
    "not_found_message",
    "resolve_relative",
    "resolve_server_paths",
    "search_path",
    "shebang_program",
]

#: How a value marks itself as a path relative to the config file.
RELATIVE_PREFIXES = ("./", "../")


def hub_bin_dir() -> str:
    """The ``bin`` directory of the environment the hub runs in (``Scripts`` on Windows)."""
    return os.path.join(sys.prefix, "Scripts" if sys.platform == "win32" else "bin")


def _dedupe(entries: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for entry in entries:
        if entry and entry not in seen:
            seen.add(entry)
            out.append(entry)
    return out


@dataclass(frozen=True)
class SearchPath:
    """Directories put around a stdio child's ``PATH``: ``before`` it and ``after`` it."""

    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()

    def path(self, base: str | None) -> str | None:
        """The child's PATH given its own ``base`` PATH (None: unset)."""
        if not self.before and not self.after:
            return base
        middle = (base if base is not None else os.defpath).split(os.pathsep)
        return os.pathsep.join(_dedupe([*self.before, *middle, *self.after]))

    def apply(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with its ``PATH`` replaced by the child's PATH."""
        out = dict(env)
        path = self.path(env.get("PATH"))
        if path is not None:
            out["PATH"] = path
        return out

    def prepended(self, entries: Sequence[str], config_dir: str) -> SearchPath:
        """This search path with ``entries`` (a server's own ``path``) put first."""
        if not entries:
            return self
        first = tuple(_absolute(e, config_dir) for e in entries)
        return SearchPath(first + self.before, self.after)


def _absolute(entry: str, base: str) -> str:
    if entry.startswith(RELATIVE_PREFIXES):
        return os.path.normpath(os.path.join(base, entry))
    return os.path.expanduser(entry)


def search_path(entries: Sequence[str], hub_bin: bool, config_dir: str) -> SearchPath:
    """The :class:`SearchPath` of ``[hub] path`` (``./`` entries under ``config_dir``)."""
    before = tuple(_absolute(e, config_dir) for e in entries)
    return SearchPath(before, (hub_bin_dir(),) if hub_bin else ())


def resolve_relative(value: str, base: str) -> str:
    """``./x`` / ``../x`` (or ``--flag=./x``) made absolute under ``base``; else unchanged."""
    if value.startswith(RELATIVE_PREFIXES):
        return os.path.normpath(os.path.join(base, value))
    if value.startswith("-") and "=" in value:
        flag, _, rest = value.partition("=")
        if rest.startswith(RELATIVE_PREFIXES):
            return f"{flag}={os.path.normpath(os.path.join(base, rest))}"
    return value


def resolve_server_paths(
    command: str | None, args: Sequence[str], cwd: str | None, config_dir: str
) -> tuple[str | None, list[str], str | None]:
    """A server's ``command``, ``args`` and ``cwd`` with their ``./`` paths resolved."""
    if cwd is not None and cwd.startswith(RELATIVE_PREFIXES):
        cwd = os.path.normpath(os.path.join(config_dir, cwd))
    base = os.path.abspath(os.path.expanduser(cwd)) if cwd is not None else config_dir
    if command is not None and command.startswith(RELATIVE_PREFIXES):
        command = os.path.normpath(os.path.join(base, command))
    return command, [resolve_relative(a, base) for a in args], cwd


def _has_separator(command: str) -> bool:
    return os.sep in command or bool(os.altsep and os.altsep in command)


def find_command(command: str, path: str | None, cwd: str | None = None) -> str | None:
    """The executable a child runs: a path as given (relative to ``cwd``), else found on ``path``."""
    if _has_separator(command):
        full = command if os.path.isabs(command) else os.path.join(cwd or os.getcwd(), command)
        return command if os.path.exists(full) else None
    return shutil.which(command, path=path)


def not_found_message(command: str) -> str:
    """Why ``command`` cannot start, and what to change in ``servers.toml``."""
    if _has_separator(command):
        return (f"command not found: {command} (no such file; a path starting with ./ is "
                "relative to the config file, or to cwd when it is set)")
    return (f"command not found: {command} (not on the child's PATH, which `mcp-hub check` "
            "shows; add its folder to [hub] path in servers.toml, or use its absolute path)")


def shebang_program(executable: str) -> str | None:
    """The program a ``#!/usr/bin/env PROGRAM`` script needs on PATH (None: none needed)."""
    try:
        with open(executable, "rb") as f:
            head = f.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    if not words or os.path.basename(words[0]) != "env":
        return None
    for word in words[1:]:
        if not word.startswith("-") and "=" not in word:
            return word
    return None
