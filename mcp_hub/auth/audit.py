"""The audit trail: one JSON line per tool call, per extension request and per denied request.

A line holds the time, the identity (its ``sub`` or ``token:NAME``), the OAuth
client id, the session, the exposed tool name, the server, the outcome, the
duration and the sizes of the arguments and the result. An extension request
(``tasks/*``, ``skills/*``, ``resources/directory/read``, a ``resources/read`` of a
``ui://`` or ``skill://`` address: :mod:`mcp_hub.downstream.extension_audit`) holds
its method, target (task id or URI) and server instead of the tool and sizes.
Arguments themselves
are written only with ``[audit] include_arguments = true``, and then redacted:
values under secret-looking keys are hidden and every string passes through
:func:`mcp_hub.redact.redact`.

Writing never blocks the event loop and never fails a call: lines go to a
bounded queue drained by one writer thread. A write error (a full disk, a
removed folder) is logged — at most once a minute — and the line is dropped;
the next line tries again. ``path = "-"`` writes to the log stream (stderr).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp_hub.auth.settings import AuditConfig
from mcp_hub.compat.libs import request_connection
from mcp_hub.redact import REDACTED, redact

__all__ = ["AuditLog"]

logger = logging.getLogger("mcp_hub.audit")

_MAX_PENDING = 10_000
_ERROR_EVERY = 60.0
_DEPTH = 20


class AuditLog:
    """Appends audit lines from a writer thread (see the module docstring)."""

    def __init__(self, config: AuditConfig | None) -> None:
        self.path = config.path if config else None
        self.include_arguments = bool(config and config.include_arguments)
        self._secret_keys = tuple(k.lower() for k in (config.redact_keys if config else []))
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()
        self._pending = 0
        self.dropped = 0
        self.write_errors = 0
        self._last_error = float("-inf")

    @property
    def enabled(self) -> bool:
        return bool(self.path)

    # ---------------------------------------------------------------- records
    def call(self, *, identity: str | None, client_id: str | None, session: str | None, tool: str,
             server: str, outcome: str, seconds: float, arguments: Mapping[str, Any] | None,
             result_size: int, upstream_tool: str | None = None) -> None:
        """Record one tool call (outcome ``ok``, ``error``, ``denied`` or ``unknown``);
        ``upstream_tool``: an upstream tool's own name (a rewrite may expose it under another)."""
        if not self.path:
            return
        args_text = json.dumps(arguments or {}, default=str)
        line: dict[str, Any] = {
            "time": _now(), "event": "call", "identity": identity, "client_id": client_id,
            "session": session, "tool": tool, "server": server, "outcome": outcome,
            "duration_ms": round(seconds * 1000.0, 3), "arguments_bytes": len(args_text.encode()),
            "result_bytes": result_size,
        }
        if upstream_tool is not None:
            line["upstream_tool"] = upstream_tool
        if self.include_arguments:
            line["arguments"] = self._redacted(arguments or {}, 0)
        self._put(line)

    def request(self, *, identity: str | None, client_id: str | None, session: str | None,
                method: str, target: str | None, server: str | None, outcome: str,
                seconds: float) -> None:
        """Record one extension request (tasks, app and skill reads, skills): its method,
        target (task id or URI), the server it went to, outcome ``ok`` or ``error``."""
        if not self.path:
            return
        self._put({"time": _now(), "event": "request", "identity": identity,
                   "client_id": client_id, "session": session, "method": method,
                   "target": target, "server": server, "outcome": outcome,
                   "duration_ms": round(seconds * 1000.0, 3)})

    def denied(self, *, identity: str | None, client_id: str | None, method: str, path: str,
               status: int, reason: str) -> None:
        """Record a request refused before it reached the hub (401, 403)."""
        if not self.path:
            return
        self._put({"time": _now(), "event": "denied", "identity": identity, "client_id": client_id,
                   "method": method, "path": path, "status": status, "outcome": "denied",
                   "reason": reason})

    def _redacted(self, value: Any, depth: int) -> Any:
        if depth > _DEPTH:
            return "…"
        if isinstance(value, Mapping):
            return {str(k): REDACTED if any(s in str(k).lower() for s in self._secret_keys)
                    else self._redacted(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redacted(v, depth + 1) for v in value]
        if isinstance(value, str):
            return redact(value)
        return value

    # ---------------------------------------------------------------- writing
    def _put(self, line: dict[str, Any]) -> None:
        with self._idle:
            if self._pending >= _MAX_PENDING:
                self.dropped += 1
                return
            self._pending += 1
        self._queue.put(json.dumps(line, ensure_ascii=False, default=str))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="mcp-hub-audit", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            text = self._queue.get()
            if text is None:
                return
            batch = [text]
            while True:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._write(batch)
                    return
                batch.append(more)
            self._write(batch)

    def _write(self, batch: list[str]) -> None:
        try:
            if self.path == "-":
                for text in batch:
                    logger.info("%s", text)
            else:
                with Path(self.path or "").open("a", encoding="utf-8") as out:
                    out.write("\n".join(batch) + "\n")
        except OSError as exc:
            self.write_errors += 1
            self.dropped += len(batch)
            now = time.monotonic()
            if now - self._last_error >= _ERROR_EVERY:
                self._last_error = now
                logger.error("cannot write the audit log %s: %s (%d line(s) dropped so far)",
                             self.path, exc.strerror or type(exc).__name__, self.dropped)
        finally:
            with self._idle:
                self._pending -= len(batch)
                self._idle.notify_all()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait (in a thread, not on the event loop) until every queued line is written."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stats(self) -> dict[str, Any]:
        return {"path": self.path, "dropped": self.dropped, "write_errors": self.write_errors}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def audit_fields(caller: Any, call: Any, tool: str, server: str, status: str, known: bool,
                 seconds: float, arguments: Mapping[str, Any] | None, result: Any) -> dict[str, Any]:
    """The fields of :meth:`AuditLog.call` for one finished call of the hub.

    ``caller`` is a :class:`~mcp_hub.hub.access.Caller`, ``call`` a
    :class:`~mcp_hub.pipeline.context.CallContext`. A name that exists but that the caller
    may not reach failed as "unknown" to the caller; the audit line says ``denied``.
    """
    session = getattr(call, "session", None)
    connection = request_connection(session)
    session_id = getattr(connection, "session_id", None)
    dump = getattr(result, "model_dump_json", None)
    return {
        "identity": caller.identity, "client_id": caller.client_id,
        "session": session_id if isinstance(session_id, str) else None,
        "tool": tool, "server": server,
        "outcome": "denied" if status == "unknown" and known else status,
        "seconds": seconds, "arguments": arguments,
        "result_size": len(dump().encode()) if callable(dump) else 0,
    }
