"""``mcp-hub install|uninstall CLIENT``: write the hub into a client's own MCP config.

Where each client keeps its user-level MCP servers (from the clients' docs):

* Claude Desktop — ``claude_desktop_config.json``, key ``mcpServers``: macOS
  ``~/Library/Application Support/Claude/``, Windows ``%APPDATA%\\Claude\\``,
  Linux ``~/.config/Claude/``.
* Claude Code — its own CLI when ``claude`` is on PATH (``claude mcp add-json
  --scope user``, ``claude mcp remove --scope user``); otherwise the top-level
  ``mcpServers`` of ``~/.claude.json`` (the user scope), written directly.
* Cursor — ``~/.cursor/mcp.json``, key ``mcpServers`` (all systems).
* VS Code — the user ``mcp.json``, key ``servers`` (JSON with comments): macOS
  ``~/Library/Application Support/Code/User/``, Windows ``%APPDATA%\\Code\\User\\``,
  Linux ``~/.config/Code/User/``.

Writing a file: it is read and parsed first — a malformed file is an error and
is not touched. The hub's entry is added or replaced by :mod:`mcp_hub.clients.jsonedit`,
so every other byte stays as it was. An entry already equal to the new one is
left alone (installing twice changes nothing); a different entry of the same
name is replaced only with ``--force``. Before any change the old file is copied
to ``NAME.mcp-hub-YYYYmmddTHHMMSS-XXXXXXXX.bak`` beside it, and the new text is
written to a temporary file that then replaces the old one (``os.replace``), so the
file is never half written.

The folder may be shared with other programs or people, so nothing here follows a
name someone else could have planted: the backup and the temporary file get
unpredictable names and are created exclusively (``O_CREAT|O_EXCL|O_NOFOLLOW``,
mode 0600, by :func:`tempfile.mkstemp`), and a symlink or an existing file at one of
those names is never written through. Two installs at once (several clients set up
by one script) cannot lose each other's entries: read, edit and replace happen
under an exclusive ``flock`` on ``.NAME.mcp-hub.lock`` beside the file (opened
without following a symlink, removed when done), and the file is read again once
the lock is held.

Nothing is left behind that was not there before. A file install had to create is
marked by ``.NAME.mcp-hub-created`` beside it (created exclusively, 0600); when
uninstall leaves such a file holding nothing (``{}``), the file and its mark are
removed instead of written. Only the newest :data:`KEEP_BACKUPS` backups of a file
are kept: older ``NAME.mcp-hub-*.bak`` files are removed after each write — only
regular files of the current user, never through a symlink.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_hub.clients import jsonedit
from mcp_hub.clients.importer import default_config_paths
from mcp_hub.errors import HubError
from mcp_hub.plumbing.atomic_files import replace_file

__all__ = ["KEEP_BACKUPS", "Outcome", "Target", "install", "target", "uninstall"]

#: How many backups of one client file are kept (the newest; older ones are removed).
KEEP_BACKUPS = 5

_TITLES = {"claude-desktop": "Claude Desktop", "claude-code": "Claude Code",
           "cursor": "Cursor", "vscode": "VS Code"}

Runner = Callable[[list[str]], subprocess.CompletedProcess[str]]


@dataclass(frozen=True)
class Target:
    """One client's config file: where, under which key, and whether comments are allowed."""

    client: str
    path: Path
    container: str
    comments: bool


@dataclass
class Outcome:
    """What install/uninstall did, for the user."""

    message: str
    changed: bool
    backup: Path | None = None


def target(client: str, *, file: Path | None = None, home: Path | None = None,
           platform: str | None = None, environ: Mapping[str, str] | None = None) -> Target:
    """The config file of ``client`` (``file`` overrides the usual location)."""
    home = Path.home() if home is None else home
    if client == "claude-desktop":
        path = default_config_paths("claude-desktop", platform=platform, home=home,
                                    environ=environ)[0]
    elif client == "vscode":
        path = default_config_paths("vscode", platform=platform, home=home, environ=environ)[-1]
    elif client == "cursor":
        path = home / ".cursor" / "mcp.json"
    elif client == "claude-code":
        path = home / ".claude.json"
    else:
        raise HubError(f"unknown client {client!r}; choose one of {', '.join(_TITLES)}")
    return Target(client, file if file is not None else path,
                  "servers" if client == "vscode" else "mcpServers", client == "vscode")


# ── reading and writing one file ──────────────────────────────────────────────


def _read(path: Path) -> tuple[str | None, str]:
    """The file's text without a byte-order mark (None: no file), and the mark."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        raise HubError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HubError(f"{path}: not UTF-8 text (byte {exc.start}); the file was not "
                       "changed") from None
    if text.startswith("\ufeff"):
        return text[1:], "\ufeff"
    return text, ""


def _exclusive(path: Path, suffix: str, data: bytes) -> Path:
    """A new file beside ``path`` holding ``data``, under an unpredictable name, created
    with ``O_CREAT|O_EXCL|O_NOFOLLOW`` (a planted name or symlink is never written through)."""
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.mcp-hub-{suffix}",
                                suffix=".bak")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        os.unlink(name)
        raise
    return Path(name)


def _backup(path: Path, data: bytes) -> Path:
    """A copy of the old file's bytes, ``NAME.mcp-hub-STAMP-XXXXXXXX.bak`` (0600)."""
    return _exclusive(path, time.strftime("%Y%m%dT%H%M%S-", time.gmtime()), data)


def _write(path: Path, text: str, old: bytes | None) -> Path | None:
    """Replace ``path`` with ``text`` atomically, after backing up the ``old`` bytes."""
    backup = _backup(path, old) if old is not None else None
    mode = stat.S_IMODE(os.stat(path).st_mode) if old is not None else None
    replace_file(path, text.encode("utf-8"), prefix=f".{path.name}.mcp-hub-", mode=mode)
    if backup is not None:
        _prune_backups(path, keep=backup)
    return backup


def _own_regular_file(path: Path) -> os.stat_result | None:
    """``path``'s own status if it is a regular file of this user (a symlink is not)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
        return None
    return st


def _prune_backups(path: Path, keep: Path) -> None:
    """Remove all but the newest :data:`KEEP_BACKUPS` backups of ``path`` (``keep`` stays)."""
    found: list[tuple[float, str, Path]] = []
    for candidate in path.parent.glob(f"{glob.escape(path.name)}.mcp-hub-*.bak"):
        st = _own_regular_file(candidate)
        if st is not None and candidate != keep:
            found.append((st.st_mtime, candidate.name, candidate))
    found.sort(reverse=True)
    for _, _, old in found[max(KEEP_BACKUPS - 1, 0):]:
        old.unlink(missing_ok=True)  # unlink removes the name, never what a link points at


def _created_mark(path: Path) -> Path:
    return path.with_name(f".{path.name}.mcp-hub-created")


def _mark_created(path: Path) -> None:
    """Note that install created ``path`` (an existing name, a symlink included, is left)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with suppress(OSError):  # without the mark, uninstall leaves "{}": no harm done
        os.close(os.open(_created_mark(path), flags, 0o600))


def _created_by_install(path: Path) -> bool:
    return _own_regular_file(_created_mark(path)) is not None


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``.NAME.mcp-hub.lock`` beside ``path``: one install or
    uninstall of that file at a time. The lock file is opened without following a
    symlink, must be a regular file, and is removed again before the lock is released
    (a process that locked a removed one opens the new one and waits again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32":  # pragma: no cover - no flock; one install at a time there
        yield
        return
    lock = path.with_name(f".{path.name}.mcp-hub.lock")
    fd = _lock_file(lock, path)
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)  # closing releases the lock


def _lock_file(lock: Path, path: Path) -> int:
    """The descriptor of ``lock``, locked, still the file at that name."""
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(lock, flags, 0o600)
        except OSError as exc:
            raise HubError(f"{lock}: cannot open the lock file ({exc.strerror}); "
                           f"{path.name} was not changed") from None
        try:
            held = os.fstat(fd)
            if not stat.S_ISREG(held.st_mode):
                raise HubError(f"{lock} is not a regular file; {path.name} was not changed")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.lstat(lock)
            except FileNotFoundError:
                now = None
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)  # the holder before us removed it: lock the new one


def _check(before: Any, after_text: str, t: Target, name: str, entry: Any) -> None:
    """The edited text parses, holds ``entry`` under ``name``, and nothing else changed."""
    after, _ = jsonedit.parse(after_text, comments=t.comments)
    expected = dict(before) if isinstance(before, dict) else {}
    servers = dict(expected.get(t.container) or {})
    if entry is None:
        servers.pop(name, None)
    else:
        servers[name] = entry
    if servers or entry is not None:
        expected[t.container] = servers
    else:
        expected.pop(t.container, None)
    if after != expected:  # pragma: no cover - a bug in jsonedit, never the user's file
        raise HubError(f"{t.path}: editing the file went wrong; it was not changed")


def _install_file(t: Target, name: str, entry: dict[str, Any], force: bool) -> Outcome:
    path = Path(os.path.realpath(t.path))
    with _locked(path):
        return _install_locked(t, path, name, entry, force)


def _install_locked(t: Target, path: Path, name: str, entry: dict[str, Any],
                    force: bool) -> Outcome:
    """:func:`_install_file` once the lock is held: the file as it is now, edited."""
    text, bom = _read(path)
    blank = text is None or not text.strip()
    try:
        before, _ = ({}, None) if blank else jsonedit.parse(text or "", comments=t.comments)
        current = None if blank else jsonedit.get_member(text or "", t.container, name,
                                                         comments=t.comments)
    except jsonedit.JsonEditError as exc:
        raise HubError(f"{path}: {exc}; the file was not changed") from None
    if current == entry:
        return Outcome(f"{path} already has this entry {name!r}; nothing to do", False)
    if current is not None and not force:
        raise HubError(f"{path} already has a different server named {name!r}; pass --force "
                       "to replace it, or --name to add the hub under another name")
    if blank:
        new = json.dumps({t.container: {name: entry}}, indent=2, ensure_ascii=False) + "\n"
    else:
        new = jsonedit.set_member(text or "", t.container, name, entry, comments=t.comments)
    _check(before, new, t, name, entry)
    backup = _write(path, bom + new, None if text is None else (bom + text).encode())
    if text is None:
        _mark_created(path)
    verb = "replaced" if current is not None else "added"
    return Outcome(f"{verb} {name!r} {'in' if current is not None else 'to'} {path}", True, backup)


def _uninstall_file(t: Target, name: str) -> Outcome:
    path = Path(os.path.realpath(t.path))
    if not path.parent.is_dir():  # no folder, no file: nothing to lock or remove
        return Outcome(f"{path} has no server named {name!r}; nothing to do", False)
    with _locked(path):
        return _uninstall_locked(t, path, name)


def _uninstall_locked(t: Target, path: Path, name: str) -> Outcome:
    """:func:`_uninstall_file` once the lock is held."""
    text, bom = _read(path)
    if text is None or not text.strip():
        return Outcome(f"{path} has no server named {name!r}; nothing to do", False)
    try:
        before, _ = jsonedit.parse(text, comments=t.comments)
        new = jsonedit.remove_member(text, t.container, name, comments=t.comments)
    except jsonedit.JsonEditError as exc:
        raise HubError(f"{path}: {exc}; the file was not changed") from None
    if new is None:
        return Outcome(f"{path} has no server named {name!r}; nothing to do", False)
    _check(before, new, t, name, None)
    if _created_by_install(path) and jsonedit.parse(new, comments=t.comments)[0] == {}:
        # install made this file and nothing is left in it: leave no trace of it.
        path.unlink()
        _created_mark(path).unlink(missing_ok=True)
        return Outcome(f"removed {name!r} and {path}, which install had created", True)
    backup = _write(path, bom + new, (bom + text).encode())
    return Outcome(f"removed {name!r} from {path}", True, backup)


# ── Claude Code's own CLI ─────────────────────────────────────────────────────


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)


def _claude(argv: list[str], run: Runner) -> None:
    done = run(argv)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        raise HubError(f"`{' '.join(argv[:4])} …` failed (exit {done.returncode})"
                       + (f": {why[-1]}" if why else ""))


def _current(t: Target, name: str) -> Any:
    """The entry ``name`` in Claude Code's file as it is now (None: none, or unreadable)."""
    text, _ = _read(t.path)
    try:
        return jsonedit.get_member(text, t.container, name) if text and text.strip() else None
    except jsonedit.JsonEditError:
        return None  # Claude Code's CLI owns the file; let it judge it


def _claude_cli(environ: Mapping[str, str] | None) -> str | None:
    path = (os.environ if environ is None else environ).get("PATH")
    return shutil.which("claude", path=path)


# ── the commands ──────────────────────────────────────────────────────────────


def install(t: Target, name: str, entry: dict[str, Any], *, force: bool = False,
            use_cli: bool = True, environ: Mapping[str, str] | None = None,
            run: Runner = _run) -> Outcome:
    """Add the hub's ``entry`` as ``name`` to the client of ``t``."""
    claude = _claude_cli(environ) if t.client == "claude-code" and use_cli else None
    if claude is None:
        return _install_file(t, name, entry, force)
    current = _current(t, name)
    if current == entry:
        return Outcome(f"Claude Code already has this entry {name!r}; nothing to do", False)
    if current is not None and not force:
        raise HubError(f"Claude Code already has a different server named {name!r}; pass "
                       "--force to replace it, or --name to add the hub under another name")
    if current is not None:
        _claude([claude, "mcp", "remove", "--scope", "user", name], run)
    _claude([claude, "mcp", "add-json", "--scope", "user", name,
             json.dumps(entry, ensure_ascii=False)], run)
    return Outcome(f"added {name!r} with `claude mcp add-json --scope user`", True)


def uninstall(t: Target, name: str, *, use_cli: bool = True,
              environ: Mapping[str, str] | None = None, run: Runner = _run) -> Outcome:
    """Remove the entry ``name`` from the client of ``t``."""
    claude = _claude_cli(environ) if t.client == "claude-code" and use_cli else None
    if claude is None:
        return _uninstall_file(t, name)
    if _current(t, name) is None:
        return Outcome(f"Claude Code has no user server named {name!r}; nothing to do", False)
    _claude([claude, "mcp", "remove", "--scope", "user", name], run)
    return Outcome(f"removed {name!r} with `claude mcp remove --scope user`", True)


def title(client: str) -> str:
    """The client's product name."""
    return _TITLES.get(client, client)
