"""File toolset ``file``: ``read_file``, ``write_file``, ``search_files``.

Every path is confined to ``[builtins.file] roots``. A path is resolved to its
real location first (``~`` expanded, relative paths joined to the *first* root,
``..`` and every symlink resolved) and used only when that real location is a
root or lies under one; so ``../../etc/passwd`` and a symlink inside a root that
points outside it are both refused. Relative roots in the config are taken
relative to the folder of ``servers.toml``. The tools are hidden (``check_fn``
False) while no roots are configured.

The handlers are synchronous: the registry runs them in a worker thread, so the
file I/O never blocks the event loop.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from mcp.types import CallToolResult, ContentBlock, TextContent

from mcp_hub.errors import HubError
from mcp_hub.pipeline.runtime import get_config
from mcp_hub.registry.tool_registry import registry, tool_error

if TYPE_CHECKING:  # imported by the first content search: a hub that never searches skips it
    import regex as re

__all__ = [
    "READ_FILE_SCHEMA",
    "SEARCH_FILES_SCHEMA",
    "WRITE_FILE_SCHEMA",
    "OutsideRootsError",
    "allowed_roots",
    "check_file_requirements",
    "read_file_tool",
    "resolve_in_roots",
    "search_files_tool",
    "write_file_tool",
]

EMPTY_FILE = "(empty file)"
NO_ROOTS = "The file tools are disabled: no [builtins.file] roots are configured."
MAX_WRITE_BYTES = 10 * 1024 * 1024
DEFAULT_SEARCH_LIMIT = 50
MAX_SEARCH_FILE_BYTES = 10 * 1024 * 1024
MAX_MATCH_LINE_CHARS = 300
MAX_SCAN_LINE_CHARS = 10_000
SEARCH_TIME_BUDGET_SECONDS = 20.0
#: CPU seconds one content regex may spend on one line. The ``regex`` module checks
#: this inside the match (so ``(a+)+$`` on a long line stops) and matches with the
#: GIL released, so a slow pattern never stalls the hub's event loop.
REGEX_TIMEOUT_SECONDS = 2.0
COUNT_LINES_MAX_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 8192
_CHUNK = 64 * 1024

#: Folders search_files does not descend into (unless the search starts inside one).
SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox",
})


class OutsideRootsError(HubError, ValueError):
    """A path whose real location is not under any allowed root."""


class _Refused(HubError):
    """A failure the model should read: becomes an isError result with this message."""


# ── path confinement ─────────────────────────────────────────────────────────────


def allowed_roots() -> list[Path]:
    """The configured roots as real absolute paths, in config order."""
    config = get_config()
    base = config.source.parent if config.source is not None else Path.cwd()
    roots: list[Path] = []
    for raw in config.builtins.file.roots:
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = base / path
        real = Path(os.path.realpath(path))
        if real not in roots:
            roots.append(real)
    return roots


def _under(path: Path, roots: list[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def resolve_in_roots(path: str, roots: list[Path]) -> Path:
    """The real location of ``path``; raises :class:`OutsideRootsError` outside ``roots``.

    Relative paths are joined to the first root. Symlinks and ``..`` are resolved
    before the check, so neither can lead out of a root.
    """
    if not roots:
        raise OutsideRootsError(NO_ROOTS)
    candidate = Path(os.path.expanduser(path))
    if not candidate.is_absolute():
        candidate = roots[0] / candidate
    real = Path(os.path.realpath(candidate))
    if _under(real, roots):
        return real
    shown = ", ".join(str(r) for r in roots)
    if _under(Path(os.path.normpath(candidate)), roots):
        raise OutsideRootsError(
            f"Access denied: {path!r} goes through a symlink that leads outside the allowed "
            f"roots ({shown})."
        )
    raise OutsideRootsError(f"Access denied: {path!r} is outside the allowed roots ({shown}).")


def _path_arg(args: dict[str, Any], roots: list[Path], key: str = "path",
              default: str | None = None) -> Path:
    value = args.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise _Refused(f"'{key}' must be a non-empty string.")
    if "\x00" in value:
        raise _Refused(f"'{key}' must not contain NUL characters.")
    try:
        return resolve_in_roots(value, roots)
    except OutsideRootsError as exc:
        raise _Refused(str(exc)) from None


def _int_arg(args: dict[str, Any], key: str, default: int | None, minimum: int) -> int | None:
    value = args.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Refused(f"'{key}' must be an integer.")
    if value < minimum:
        raise _Refused(f"'{key}' must be at least {minimum}.")
    return value


def _os_error(exc: OSError, path: Path) -> _Refused:
    if isinstance(exc, FileNotFoundError):
        return _Refused(f"No such file: {path}")
    if isinstance(exc, PermissionError):
        return _Refused(f"Permission denied: {path}")
    if isinstance(exc, IsADirectoryError):
        return _Refused(f"{path} is a directory; use search_files to list it.")
    if isinstance(exc, NotADirectoryError):
        return _Refused(f"A parent of {path} is not a directory.")
    return _Refused(f"Cannot access {path}: {exc.strerror or exc}")


def _roots_or_refuse() -> list[Path]:
    roots = allowed_roots()
    if not roots:
        raise _Refused(NO_ROOTS)
    return roots


# ── read_file ────────────────────────────────────────────────────────────────────


def _binary_error(path: Path, why: str) -> _Refused:
    return _Refused(
        f"Cannot read {path}: it looks like a binary file ({why}). read_file returns UTF-8 "
        "text only."
    )


def _count_rest(f: BinaryIO, lines_so_far: int, ended_with_newline: bool) -> int | None:
    """Total number of lines, counting the unread rest of ``f`` (None if too large)."""
    try:
        size = os.fstat(f.fileno()).st_size
    except OSError:
        return None
    if size > COUNT_LINES_MAX_BYTES:
        return None
    count = lines_so_far
    last_newline = ended_with_newline
    while chunk := f.read(1024 * 1024):
        count += chunk.count(b"\n")
        last_newline = chunk.endswith(b"\n")
    return count if last_newline else count + 1


def _read_range(f: BinaryIO, path: Path, offset: int, limit: int | None,
                max_bytes: int) -> tuple[str, int, int | None, bool]:
    """Lines ``offset``… (at most ``limit``) within ``max_bytes``.

    Returns (text, last line shown, total lines or None, truncated by the byte cap).
    """
    stop = None if limit is None else offset + limit
    pieces: list[bytes] = []
    used = 0
    line_no = 1  # the line the next chunk belongs to
    complete_lines = 0
    last_shown = offset - 1
    truncated = False
    ended_with_newline = True
    while True:
        chunk = f.readline(_CHUNK)
        if not chunk:
            break
        ends = chunk.endswith(b"\n")
        ended_with_newline = ends
        if stop is not None and line_no >= stop:
            # Past the requested range: count the rest, this chunk included.
            total = _count_rest(f, complete_lines + chunk.count(b"\n"), ends)
            return _decode(pieces, path, truncated), last_shown, total, truncated
        if line_no >= offset:
            if b"\x00" in chunk:
                raise _binary_error(path, "it contains NUL bytes")
            room = max_bytes - used
            if len(chunk) > room:
                pieces.append(chunk[:room])
                truncated = True
                last_shown = line_no
                total = _count_rest(f, complete_lines + chunk.count(b"\n"), ends)
                return _decode(pieces, path, truncated), last_shown, total, truncated
            pieces.append(chunk)
            used += len(chunk)
            last_shown = line_no
        if ends:
            line_no += 1
            complete_lines += 1
    total = complete_lines if ended_with_newline else complete_lines + 1
    return _decode(pieces, path, truncated), last_shown, total, truncated


def _decode(pieces: list[bytes], path: Path, truncated: bool) -> str:
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        # A cut at the byte cap may split a character: leave its start out.
        return decoder.decode(b"".join(pieces), final=not truncated)
    except UnicodeDecodeError:
        raise _binary_error(path, "it is not valid UTF-8") from None


def _read_file(args: dict[str, Any]) -> CallToolResult:
    roots = _roots_or_refuse()
    path = _path_arg(args, roots)
    offset = _int_arg(args, "offset", 1, 1) or 1
    limit = _int_arg(args, "limit", None, 1)
    max_bytes = get_config().builtins.file.max_read_bytes
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise _Refused(f"{path} is a directory; use search_files to list it.")
        if not stat.S_ISREG(st.st_mode):
            raise _Refused(f"{path} is not a regular file.")
        with open(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
            if not head:
                return CallToolResult(content=[TextContent(text=EMPTY_FILE)])
            if b"\x00" in head:
                raise _binary_error(path, "it contains NUL bytes")
            f.seek(0)
            text, last, total, truncated = _read_range(f, path, offset, limit, max_bytes)
    except OSError as exc:
        raise _os_error(exc, path) from None

    if last < offset:
        of_total = f" (it has {total} lines)" if total is not None else ""
        raise _Refused(f"offset {offset} is past the end of {path}{of_total}.")
    notes: list[str] = []
    total_s = str(total) if total is not None else "?"
    more_after = truncated or total is None or last < total
    if offset > 1 or more_after:
        notes.append(f"Showing lines {offset}-{last} of {total_s} of {path}.")
    if truncated:
        notes.append(f"Output stopped at the {max_bytes}-byte read limit"
                     + (" in the middle of that line." if text and not text.endswith("\n")
                        else "."))
    if more_after:
        # Restart a line cut by the cap, unless it alone is over the cap.
        cut_mid_line = truncated and not text.endswith("\n")
        next_offset = last if cut_mid_line and last > offset else last + 1
        notes.append(f"Call read_file with offset={next_offset} to continue.")
    content: list[ContentBlock] = [TextContent(text=text)]
    if notes:
        content.append(TextContent(text="[" + " ".join(notes) + "]"))
    return CallToolResult(content=content)


def read_file_tool(args: dict[str, Any], **_context: Any) -> CallToolResult:
    """Read a UTF-8 text file under a root, optionally a line range."""
    try:
        return _read_file(args)
    except _Refused as exc:
        return tool_error(str(exc))


# ── write_file ───────────────────────────────────────────────────────────────────


def _write_file(args: dict[str, Any]) -> dict[str, Any]:
    roots = _roots_or_refuse()
    path = _path_arg(args, roots)
    content = args.get("content")
    if not isinstance(content, str):
        raise _Refused("'content' must be a string.")
    data = content.encode("utf-8")
    if len(data) > MAX_WRITE_BYTES:
        raise _Refused(f"content is {len(data)} bytes; write_file accepts at most "
                       f"{MAX_WRITE_BYTES}.")
    if path in roots:
        raise _Refused(f"{path} is a root folder, not a file.")
    try:
        existed = path.exists()
        if path.is_dir():
            raise _Refused(f"{path} is a directory.")
        path.parent.mkdir(parents=True, exist_ok=True)
        # A folder may have been swapped for a symlink meanwhile: check again.
        again = Path(os.path.realpath(path))
        if again != path or not _under(again, roots):
            raise _Refused(f"Access denied: {path} changed while it was being written.")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, 0o666)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise _os_error(exc, path) from None
    return {"path": str(path), "bytes_written": len(data), "created": not existed}


def write_file_tool(args: dict[str, Any], **_context: Any) -> Any:
    """Write (create or overwrite) a UTF-8 text file under a root."""
    try:
        return _write_file(args)
    except _Refused as exc:
        return tool_error(str(exc))


# ── search_files ─────────────────────────────────────────────────────────────────


def _walk(base: Path) -> Iterator[tuple[Path, bool]]:
    """(path, is_dir) under ``base``, sorted, not following symlinked folders."""
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
        here = Path(dirpath)
        for d in dirnames:
            yield here / d, True
        for name in sorted(filenames):
            yield here / name, False


def _name_matches(pattern: str, path: Path, base: Path) -> bool:
    if "/" in pattern:
        return fnmatch.fnmatchcase(path.relative_to(base).as_posix(), pattern)
    return fnmatch.fnmatchcase(path.name, pattern)


def _grep(path: Path, regex: re.Pattern[str], deadline: float,
          room: int) -> Iterator[dict[str, Any]]:
    try:
        if os.path.getsize(path) > MAX_SEARCH_FILE_BYTES:
            return
        with open(path, "rb") as f:
            if b"\x00" in f.read(SNIFF_BYTES):
                return
            f.seek(0)
            for number, raw in enumerate(f, start=1):
                if time.monotonic() > deadline or room <= 0:
                    return
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                budget = max(min(REGEX_TIMEOUT_SECONDS, deadline - time.monotonic()), 0.01)
                try:
                    found = regex.search(line[:MAX_SCAN_LINE_CHARS], timeout=budget,
                                         concurrent=True)
                except TimeoutError:
                    raise _Refused(
                        f"The regular expression {regex.pattern!r} took more than "
                        f"{budget:.1f} s on line {number} of {path} (catastrophic backtracking, "
                        "such as nested repeats like (a+)+). Simplify the pattern."
                    ) from None
                if found:
                    room -= 1
                    yield {"path": str(path), "line": number,
                           "text": line[:MAX_MATCH_LINE_CHARS]}
    except OSError:
        return


def _search_files(args: dict[str, Any]) -> dict[str, Any]:
    roots = _roots_or_refuse()
    base = _path_arg(args, roots, default=str(roots[0]))
    pattern = args.get("pattern", "*")
    if not isinstance(pattern, str) or not pattern:
        raise _Refused("'pattern' must be a non-empty glob such as '*.py'.")
    content = args.get("content")
    if content is not None and (not isinstance(content, str) or not content):
        raise _Refused("'content' must be a non-empty regular expression.")
    ignore_case = args.get("ignore_case", False)
    if not isinstance(ignore_case, bool):
        raise _Refused("'ignore_case' must be a boolean.")
    cap = get_config().builtins.file.max_search_results
    limit = min(_int_arg(args, "limit", DEFAULT_SEARCH_LIMIT, 1) or DEFAULT_SEARCH_LIMIT, cap)
    regex: re.Pattern[str] | None = None
    if content is not None:
        import regex as re

        try:
            regex = re.compile(content, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise _Refused(f"Invalid regular expression {content!r}: {exc}") from None
    if not base.exists():
        raise _Refused(f"No such file or folder: {base}")

    deadline = time.monotonic() + SEARCH_TIME_BUDGET_SECONDS
    matches: list[dict[str, Any]] = []
    scanned = 0
    stopped: str | None = None
    entries: Iterator[tuple[Path, bool]] = (
        _walk(base) if base.is_dir() else iter([(base, False)])
    )
    for path, is_dir in entries:
        if len(matches) >= limit:
            stopped = f"result limit ({limit}) reached"
            break
        if time.monotonic() > deadline:
            stopped = f"time budget ({SEARCH_TIME_BUDGET_SECONDS:.0f} s) used up"
            break
        if path != base and not _name_matches(pattern, path, base):
            continue
        if path.is_symlink() and not _under(Path(os.path.realpath(path)), roots):
            continue  # a link out of the roots is neither listed nor read
        if regex is None:
            entry: dict[str, Any] = {"path": str(path), "type": "dir" if is_dir else "file"}
            if not is_dir:
                try:
                    entry["size"] = path.stat().st_size
                except OSError:
                    continue
            matches.append(entry)
            continue
        if is_dir or not path.is_file():
            continue
        scanned += 1
        matches.extend(_grep(path, regex, deadline, limit - len(matches)))
    else:
        if time.monotonic() > deadline:
            stopped = f"time budget ({SEARCH_TIME_BUDGET_SECONDS:.0f} s) used up"
    if len(matches) >= limit and stopped is None:
        stopped = f"result limit ({limit}) reached"
    result: dict[str, Any] = {"base": str(base), "pattern": pattern}
    if regex is not None:
        result["content"] = content
        result["files_scanned"] = scanned
    result["count"] = len(matches)
    result["matches"] = matches
    result["truncated"] = stopped is not None
    if stopped is not None:
        result["note"] = f"Stopped early: {stopped}. Narrow the path or pattern."
    return result


def search_files_tool(args: dict[str, Any], **_context: Any) -> Any:
    """Find files by name glob and, optionally, lines by content regex, under a root."""
    try:
        return _search_files(args)
    except _Refused as exc:
        return tool_error(str(exc))


# ── check_fn ─────────────────────────────────────────────────────────────────────


def check_file_requirements() -> bool:
    """Listed only while ``[builtins.file] roots`` is non-empty."""
    return bool(get_config().builtins.file.roots)


# ── schemas ──────────────────────────────────────────────────────────────────────

_PATH_DOC = (
    "Absolute path, or relative to the first allowed root. Must stay inside the allowed "
    "roots (symlinks and '..' are resolved first)."
)

READ_FILE_SCHEMA: dict[str, Any] = {
    "name": "read_file",
    "description": (
        "Read a UTF-8 text file inside the hub's allowed folders. Returns the file's text "
        "exactly (no line numbers); for part of a file give `offset` (first line, 1-based) "
        "and `limit` (number of lines), and a note says which lines were shown and where to "
        "continue. At most 100 KB (configurable) per call. Binary files are refused; an "
        "empty file reads as '(empty file)'."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": _PATH_DOC},
            "offset": {"type": "integer", "minimum": 1, "default": 1,
                       "description": "First line to read, 1-based."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1_000_000,
                      "description": "How many lines to read (default: to the end or the cap)."},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    "annotations": {"title": "Read file", "readOnlyHint": True, "destructiveHint": False,
                    "idempotentHint": True, "openWorldHint": False},
}

WRITE_FILE_SCHEMA: dict[str, Any] = {
    "name": "write_file",
    "description": (
        "Write a UTF-8 text file inside the hub's allowed folders, replacing its contents if it "
        "exists and creating missing parent folders. Returns the real path, bytes written and "
        "whether the file was created. At most 10 MiB per call."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": _PATH_DOC},
            "content": {"type": "string", "maxLength": MAX_WRITE_BYTES,
                        "description": "The complete new contents of the file."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    },
    "annotations": {"title": "Write file", "readOnlyHint": False, "destructiveHint": True,
                    "idempotentHint": True, "openWorldHint": False},
}

SEARCH_FILES_SCHEMA: dict[str, Any] = {
    "name": "search_files",
    "description": (
        "Find files and folders inside the hub's allowed folders whose names match a glob "
        "(`pattern`, e.g. '*.py'; a pattern with '/' matches the path relative to `path`), and "
        "optionally the lines of those files that match a regular expression (`content`). "
        "Returns absolute paths (with line numbers and text for content matches), at most "
        "`limit` results (default 50, capped by the hub). Skips binary files, files over "
        "10 MiB, and folders such as .git and node_modules."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "default": "*",
                        "description": "Glob on file and folder names, e.g. '*.md'."},
            "content": {"type": "string", "minLength": 1,
                        "description": "Regular expression (Python syntax) to find in files."},
            "path": {"type": "string", "minLength": 1,
                     "description": "Folder (or file) to search; default: the first root."},
            "ignore_case": {"type": "boolean", "default": False,
                            "description": "Match `content` case-insensitively."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000,
                      "default": DEFAULT_SEARCH_LIMIT,
                      "description": "Maximum number of results."},
        },
        "additionalProperties": False,
    },
    "annotations": {"title": "Search files", "readOnlyHint": True, "destructiveHint": False,
                    "idempotentHint": True, "openWorldHint": False},
}

# ── registration ─────────────────────────────────────────────────────────────────

registry.register(
    name="read_file",
    toolset="file",
    schema=READ_FILE_SCHEMA,
    handler=read_file_tool,
    check_fn=check_file_requirements,
    is_async=False,
    emoji="📖",
)
registry.register(
    name="write_file",
    toolset="file",
    schema=WRITE_FILE_SCHEMA,
    handler=write_file_tool,
    check_fn=check_file_requirements,
    is_async=False,
    emoji="✏️",
)
registry.register(
    name="search_files",
    toolset="file",
    schema=SEARCH_FILES_SCHEMA,
    handler=search_files_tool,
    check_fn=check_file_requirements,
    is_async=False,
    emoji="🔎",
)
