"""What the hub reports about each upstream: state, counts, last error, timings.

``mcp-hub check``, ``mcp-hub tools``, ``hub_status`` and ``/readyz`` all read
:class:`UpstreamStatus`; :func:`format_status_table` is the table the CLI prints.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["ServerState", "UpstreamStatus", "format_status_table"]


class ServerState(enum.StrEnum):
    """Lifecycle of one upstream connection.

    ``connecting`` (first attempt) → ``ready`` → ``reconnecting`` (backoff 1 s
    doubling to 60 s, ±20 % jitter) → ``ready`` again; ``parked`` after a failure
    that retrying cannot fix (command not found, 401/403, not an MCP endpoint),
    probed again every 5 minutes; ``disabled`` when ``enabled = false``.
    """

    CONNECTING = "connecting"
    READY = "ready"
    RECONNECTING = "reconnecting"
    PARKED = "parked"
    #: An OAuth server without a usable token: waits for ``mcp-hub login NAME``.
    NEEDS_LOGIN = "needs_login"
    DISABLED = "disabled"

    def __str__(self) -> str:
        return self.value


@dataclass
class UpstreamStatus:
    """A snapshot of one upstream server; ``last_error`` is already redacted."""

    name: str
    state: ServerState
    transport: str
    tools: int = 0
    prompts: int = 0
    resources: int = 0
    last_error: str | None = None
    reconnects: int = 0
    state_since: float = field(default_factory=time.time)
    connect_ms: float | None = None
    server_info: dict[str, str] | None = None
    #: Exposed tool names refused by the registry (a builtin holds the name) → reason.
    rejected_tools: dict[str, str] = field(default_factory=dict)
    #: Resource URIs this server also offers but another server owns (first wins).
    shadowed_resources: list[str] = field(default_factory=list)
    #: Calls currently in flight on this server.
    in_flight: int = 0

    @property
    def ok(self) -> bool:
        """Ready, or deliberately disabled."""
        return self.state in (ServerState.READY, ServerState.DISABLED)


def format_status_table(statuses: Sequence[UpstreamStatus]) -> str:
    """A plain-text table: server, state, transport, counts, connect time, error."""
    headers = ["SERVER", "STATE", "TRANSPORT", "TOOLS", "PROMPTS", "RESOURCES", "CONNECT", "ERROR"]
    rows: list[list[str]] = []
    for s in statuses:
        connect = f"{s.connect_ms:.0f} ms" if s.connect_ms is not None else "-"
        error = s.last_error or ""
        if s.rejected_tools:
            note = f"{len(s.rejected_tools)} tool(s) rejected: " + ", ".join(
                sorted(s.rejected_tools)
            )
            error = f"{error}; {note}" if error else note
        if len(error) > 120:
            error = error[:119] + "…"
        rows.append([
            s.name, s.state.value, s.transport, str(s.tools), str(s.prompts), str(s.resources),
            connect, error,
        ])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)
