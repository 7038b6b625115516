"""Prometheus metrics of the hub, written in the text exposition format.

Kept dependency-free: a handful of counters and one histogram need no client
library. Label values are tool and server names (never arguments or results),
and every rendered line passes through :func:`mcp_hub.redact.redact`.

Label sets stay bounded: the Hub passes a tool's name only when it is a
registered tool at call time, and :data:`UNKNOWN_TOOL` for anything else (a
made-up name is one series, however many are tried); identities beyond
:data:`MAX_IDENTITIES` are counted as :data:`OTHER_IDENTITY`.

:meth:`Metrics.render` and :meth:`Metrics.identity_summary` show one caller
only what its :class:`Shown` (the Hub's :class:`~mcp_hub.hub.access.OpsView`) lets
it see: the series of its tools and servers and its own identity's counters.
"""

from __future__ import annotations

import bisect
import threading
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_hub.redact import redact

__all__ = ["UNKNOWN_TOOL", "CallRecord", "Metrics", "Shown"]

#: The one tool label of every call to a name that is not a registered tool.
UNKNOWN_TOOL = "(unknown)"

#: Distinct identities counted by name; later ones are counted as "other" (bounded cardinality).
MAX_IDENTITIES = 100
OTHER_IDENTITY = "other"

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
           60.0, 120.0)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One finished tool call, for the status page's recent-calls list.

    ``tool`` is the name the caller called; ``listed`` the registry's name for it
    (the server-level exposed name, which access decides by: it differs under a
    profile's rename); ``upstream_tool`` the upstream's own name (None for hub and
    plugin tools).
    """

    tool: str
    server: str
    status: str
    duration_ms: float
    time: float
    upstream_tool: str | None = None
    listed: str | None = None


class Shown(Protocol):
    """Which series one caller may see (:class:`mcp_hub.hub.access.OpsView`)."""

    def shows_tool(self, name: str) -> bool: ...
    def shows_server(self, name: str) -> bool: ...
    def shows_identity(self, name: str) -> bool: ...


class _Everything:
    def shows_tool(self, name: str) -> bool:
        return True

    def shows_server(self, name: str) -> bool:
        return True

    def shows_identity(self, name: str) -> bool:
        return True


EVERYTHING: Shown = _Everything()


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Counters and a latency histogram of tool calls, plus upstream gauges."""

    def __init__(self, recent: int = 50) -> None:
        self._lock = threading.Lock()
        self.calls: dict[tuple[str, str, str], int] = defaultdict(int)
        self._hist: dict[str, list[int]] = {}
        self._hist_sum: dict[str, float] = defaultdict(float)
        self._hist_count: dict[str, int] = defaultdict(int)
        self.recent: deque[CallRecord] = deque(maxlen=recent)
        self.upstream_reconnects: dict[str, int] = {}
        #: Calls per (identity, status): the signed-in identity's name, at most MAX_IDENTITIES names.
        self.identity_calls: dict[tuple[str, str], int] = defaultdict(int)
        self._identities: set[str] = set()

    def observe_call(self, tool: str, server: str, status: str, seconds: float, now: float,
                     identity: str | None = None, *, upstream_tool: str | None = None,
                     listed: str | None = None) -> None:
        with self._lock:
            self.calls[(tool, server, status)] += 1
            if identity is not None:
                if identity not in self._identities:
                    if len(self._identities) >= MAX_IDENTITIES:
                        identity = OTHER_IDENTITY
                    else:
                        self._identities.add(identity)
                self.identity_calls[(identity, status)] += 1
            self.recent.append(CallRecord(tool, server, status, seconds * 1000.0, now,
                                          upstream_tool, listed))
            if status == "unknown":
                return  # nothing ran: no latency to record, no histogram of its own
            buckets = self._hist.get(server)
            if buckets is None:
                buckets = self._hist[server] = [0] * (len(BUCKETS) + 1)
            buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
            self._hist_sum[server] += seconds
            self._hist_count[server] += 1

    def identity_summary(self, shows: Callable[[str], bool] | None = None) -> dict[str, dict[str, int]]:
        """Calls per identity and status, for ``hub_status`` and the status page
        (only the identities ``shows`` admits)."""
        with self._lock:
            summary: dict[str, dict[str, int]] = {}
            for (who, status), n in sorted(self.identity_calls.items()):
                if shows is None or shows(who):
                    summary.setdefault(who, {})[status] = n
            return summary

    def render(self, *, upstreams: list[Any], list_changed: dict[str, int], sessions: int,
               view: Shown = EVERYTHING) -> str:
        """The ``/metrics`` body. ``upstreams`` are :class:`UpstreamStatus`-like objects;
        only the series ``view`` shows are written."""
        out: list[str] = []
        with self._lock:
            out.append("# HELP mcp_hub_tool_calls_total Tool calls by tool, server and status.")
            out.append("# TYPE mcp_hub_tool_calls_total counter")
            for (tool, server, status), n in sorted(self.calls.items()):
                if not (view.shows_tool(tool) and view.shows_server(server)):
                    continue
                out.append(
                    f'mcp_hub_tool_calls_total{{tool="{_esc(tool)}",server="{_esc(server)}",'
                    f'status="{_esc(status)}"}} {n}'
                )
            out.append("# HELP mcp_hub_tool_call_seconds Tool call latency by server.")
            out.append("# TYPE mcp_hub_tool_call_seconds histogram")
            for server, buckets in sorted(self._hist.items()):
                if not view.shows_server(server):
                    continue
                cumulative = 0
                label = f'server="{_esc(server)}"'
                for bound, n in zip((*BUCKETS, float("inf")), buckets, strict=True):
                    cumulative += n
                    le = "+Inf" if bound == float("inf") else repr(bound)
                    out.append(f'mcp_hub_tool_call_seconds_bucket{{{label},le="{le}"}} {cumulative}')
                out.append(f"mcp_hub_tool_call_seconds_sum{{{label}}} {self._hist_sum[server]:.6f}")
                out.append(f"mcp_hub_tool_call_seconds_count{{{label}}} {self._hist_count[server]}")
            out.append("# HELP mcp_hub_identity_calls_total Tool calls by signed-in identity and status.")
            out.append("# TYPE mcp_hub_identity_calls_total counter")
            for (who, status), n in sorted(self.identity_calls.items()):
                if not view.shows_identity(who):
                    continue
                out.append(f'mcp_hub_identity_calls_total{{identity="{_esc(who)}",status="{_esc(status)}"}} {n}')
        rows = [(_esc(st.name), str(getattr(st.state, "value", st.state)), st) for st in upstreams
                if view.shows_server(st.name)]
        families: list[tuple[str, str, str, Any]] = [
            ("mcp_hub_upstream_up", "gauge", "1 when the upstream is ready.",
             lambda n, state, st: f'{{server="{n}"}} {1 if state == "ready" else 0}'),
            ("mcp_hub_upstream_state", "gauge", "Current state of each upstream (1 for the state).",
             lambda n, state, st: f'{{server="{n}",state="{_esc(state)}"}} 1'),
            ("mcp_hub_upstream_tools", "gauge", "Tools registered from each upstream.",
             lambda n, state, st: f'{{server="{n}"}} {st.tools}'),
            ("mcp_hub_upstream_reconnects_total", "counter", "Reconnects of each upstream.",
             lambda n, state, st: f'{{server="{n}"}} {st.reconnects}'),
            ("mcp_hub_upstream_in_flight", "gauge", "Calls in flight to each upstream.",
             lambda n, state, st: f'{{server="{n}"}} {getattr(st, "in_flight", 0)}'),
        ]
        for family, kind, help_text, sample in families:
            out.append(f"# HELP {family} {help_text}")
            out.append(f"# TYPE {family} {kind}")
            for name, state, st in rows:
                out.append(family + sample(name, state, st))
        out.append("# HELP mcp_hub_list_changed_total list_changed notifications sent downstream.")
        out.append("# TYPE mcp_hub_list_changed_total counter")
        for kind, n in sorted(list_changed.items()):
            out.append(f'mcp_hub_list_changed_total{{kind="{kind}"}} {n}')
        out.append("# HELP mcp_hub_sessions Live downstream sessions (handshake era).")
        out.append("# TYPE mcp_hub_sessions gauge")
        out.append(f"mcp_hub_sessions {sessions}")
        return redact("\n".join(out)) + "\n"
