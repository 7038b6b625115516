"""Failure classification for upstream connections and calls.

What went wrong, in words a user can act on: a connect failure becomes a
:class:`~mcp_hub.upstream.transports.ConnectFailure` (permanent or not), a lost
connection during a request becomes :class:`CallLost`, a malformed response a
one-line summary. Every text is redacted before it leaves this module.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from mcp_hub.config.model import ServerConfig
from mcp_hub.errors import UpstreamError
from mcp_hub.redact import redact
from mcp_hub.upstream.transports import ConnectFailure, TransportProbe

__all__ = [
    "CallLost",
    "classify_connect_failure",
    "error_text",
    "exception_leaves",
    "validation_summary",
]


class CallLost(UpstreamError):
    """The connection died while a request was in flight.

    ``reached`` is False when the server provably never ran the request (an HTTP
    session the server no longer knows: it answered 404 before doing anything).
    """

    def __init__(self, reason: str, *, reached: bool = True) -> None:
        super().__init__(reason)
        self.reached = reached


def exception_leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            yield from exception_leaves(e)
        else:
            yield e


def error_text(exc: BaseException) -> str:
    """A one-line description of a failure, exception groups unwrapped, secrets redacted."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exception_leaves(exc)
                  if not isinstance(e, anyio.get_cancelled_exc_class())]
        if leaves:
            exc = leaves[0]
    if isinstance(exc, ConnectFailure | MCPError):
        text = exc.message
    else:
        text = str(exc) or type(exc).__name__
        if type(exc).__name__ not in text:
            text = f"{type(exc).__name__}: {text}"
    return redact(text)


def validation_summary(exc: ValidationError, result_type: type[BaseModel]) -> str:
    """One line: which result type was expected and the first thing wrong with it."""
    errors = exc.errors(include_url=False, include_input=False)
    first = errors[0] if errors else None
    where = ".".join(str(p) for p in first["loc"]) if first else ""
    what = f"{where}: {first['msg']}" if first else "does not validate"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"the result is not a valid {result_type.__name__} ({what}{more})"


def classify_connect_failure(exc: BaseException, probe: TransportProbe, config: ServerConfig) -> ConnectFailure:
    """Translate a connect failure into a :class:`ConnectFailure` (permanent or not)."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in exception_leaves(exc)
                  if not isinstance(e, anyio.get_cancelled_exc_class())]
        for leaf in leaves:
            if isinstance(leaf, ConnectFailure):
                return leaf
        if leaves:
            exc = leaves[0]
    if isinstance(exc, ConnectFailure):
        return exc
    auth = [s for s in probe.statuses if s in (401, 403)]
    if auth:
        return ConnectFailure(
            f"HTTP {auth[-1]} from {redact(config.url or '')}: not authorized "
            "(check the server's headers)", permanent=True)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int) and status in (401, 403):
        return ConnectFailure(f"HTTP {status}: not authorized (check the server's headers)",
                              permanent=True)
    if isinstance(status, int) and status in (404, 405, 406, 415):
        return ConnectFailure(f"HTTP {status}: {redact(config.url or '')} is not an MCP endpoint",
                              permanent=True)
    if isinstance(exc, MCPError):
        if exc.code == types.METHOD_NOT_FOUND and probe.statuses:
            return ConnectFailure(
                f"HTTP {probe.statuses[-1]}: {redact(config.url or '')} is not an MCP endpoint",
                permanent=True)
        if "Unexpected content type" in exc.message:
            return ConnectFailure(f"not an MCP endpoint: {redact(exc.message)}", permanent=True)
    return ConnectFailure(error_text(exc))
