"""How a CLI command that failed says so: one line with the fix, never a traceback.

Every ``mcp-hub`` command ends in :func:`report`: the error is taken out of the
exception groups the task groups wrap it in, and printed as one redacted line
naming what to do (``mcp-hub tools`` for an unknown tool name, the file and key of
a config error). An error the hub has no words for is printed as its type and
message, with ``--debug`` to see where it came from; with ``--debug`` the
(redacted) traceback is printed before that line.
"""

from __future__ import annotations

import sys
import traceback
from typing import TextIO

import httpx2
from mcp.shared.exceptions import MCPError

from mcp_hub.errors import ConfigError, HubError, UnknownToolError
from mcp_hub.redact import redact

__all__ = ["leaf_error", "report"]

#: The exit status of a config error (every other failure exits 1, Ctrl-C 130).
CONFIG_ERROR_STATUS = 2


def leaf_error(exc: BaseException) -> BaseException:
    """The error that caused ``exc``: the first one inside any exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in text.splitlines() if part.strip())


def _request_url(exc: httpx2.TransportError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:  # no request attached
        return ""


def _describe(exc: BaseException) -> tuple[str, int]:
    """The line to print for ``exc`` (without ``mcp-hub: ``) and the exit status."""
    if isinstance(exc, ConfigError):
        # Several problems are several lines, each naming the file and key.
        return f"config error: {str(exc).strip()}", CONFIG_ERROR_STATUS
    if isinstance(exc, UnknownToolError):
        hint = ("; `mcp-hub tools` lists the tool names" if not exc.suggestions
                else "")
        return f"{_one_line(str(exc))}{hint}", 1
    if isinstance(exc, HubError | MCPError):
        return _one_line(str(exc)), 1
    if isinstance(exc, OSError):
        return _one_line(str(exc)) or type(exc).__name__, 1
    if isinstance(exc, httpx2.TransportError):
        where = _request_url(exc)
        return (f"cannot reach {where or 'the server'}: {_one_line(str(exc)) or type(exc).__name__}"
                " (is the hub running there? check the URL and port)"), 1
    text = _one_line(str(exc))
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"unexpected error: {what} (run again with --debug for the traceback)", 1


def report(exc: BaseException, *, debug: bool = False, out: TextIO | None = None) -> int:
    """Print ``exc`` as the one line a user reads; returns the exit status."""
    stream = sys.stderr if out is None else out
    leaf = leaf_error(exc)
    if isinstance(leaf, KeyboardInterrupt):
        return 130
    if debug:
        stream.write(redact("".join(traceback.format_exception(exc))))
    line, status = _describe(leaf)
    if debug and line.endswith(" (run again with --debug for the traceback)"):
        line = line.removesuffix(" (run again with --debug for the traceback)")
    print(f"mcp-hub: {redact(line)}", file=stream)
    return status
