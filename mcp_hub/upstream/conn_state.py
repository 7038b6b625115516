"""The state every part of one upstream connection shares.

:class:`ConnectionState` is a plain object holding what the supervisor
(:class:`~mcp_hub.upstream.connection.ServerConnection`) and its parts read and
write: lifecycle state, the live session, the catalog lists, calls in flight and
the hooks to the manager. Each part is its own class in its own module and is
handed this one object when it is made: the catalog
(:class:`~mcp_hub.upstream.catalog.Catalog`), the call path
(:class:`~mcp_hub.upstream.calls.Calls`) and the relays
(:class:`~mcp_hub.upstream.relays.Relays`). Its methods are the small rules
more than one of them applies (is the session live, is this error fatal, mark
the connection lost).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from mcp_hub.config.model import HubSettings, ServerConfig
from mcp_hub.pins.pinning import PinStore
from mcp_hub.registry.naming import is_upstream_toolset, upstream_toolset
from mcp_hub.rewrite.tool import ArgumentPlan
from mcp_hub.upstream.in_flight import InFlightCall
from mcp_hub.upstream.list_hints import ListHint
from mcp_hub.upstream.sessions.companion import Companion
from mcp_hub.upstream.sessions.listening import Kind, WatchedUris
from mcp_hub.upstream.skills_probe import SkillsProbe
from mcp_hub.upstream.status import ServerState, UpstreamStatus
from mcp_hub.upstream.transports import TransportProbe

if TYPE_CHECKING:
    from mcp_hub.upstream.stdio.prespawn import AdoptEarly

__all__ = ["ConnectionHooks", "ConnectionState", "Kind", "ToolRecord"]

logger = logging.getLogger("mcp_hub.upstream")


BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 60.0
BACKOFF_JITTER = 0.2


@dataclass
class ConnectionHooks:
    """How a connection tells its manager about changes (all cheap, never raise)."""

    changed: Callable[[str, Kind], None]
    #: ``announced(server, kind)``: the upstream said a list changed, and listing it again
    #: found nothing the hub compares changed; its clients are told all the same.
    announced: Callable[[str, Kind], None] = lambda server, kind: None
    resource_updated: Callable[[str], Awaitable[None]] | None = None
    log: Callable[[str, types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
    logging_level: Callable[[], types.LoggingLevel | None] = lambda: None
    #: Called after every state or catalog change, for waiters (``UpstreamManager.wait_until``).
    pulse: Callable[[], None] = lambda: None
    #: ``yields_to(server, holder_toolset)``: leave the name to the holder (file order).
    yields_to: Callable[[str, str], bool] = lambda server, toolset: False
    client_name: str = "mcp-hub"
    client_version: str = "0.1.0"
    #: Tool pins (trust on first use); None when pinning is unavailable.
    pins: PinStore | None = None
    #: The hub's own answer to a ``roots/list`` no downstream call can take (mcp_hub.protocol.roots).
    roots: Callable[[], types.ListRootsResult] | None = None
    #: ``adopt_early(name, argv, env, cwd)``: the Hub's process started early for this
    #: server, if it was started exactly so (mcp_hub.upstream.stdio.prespawn); None adopts nothing.
    adopt_early: AdoptEarly | None = None
    #: ``task_status(server, params)``: the upstream's ``notifications/tasks/status``.
    task_status: Callable[[str, dict[str, Any]], Awaitable[None]] | None = None


@dataclass(slots=True)
class ToolRecord:
    """One upstream tool as registered: its exposed name and MCP definition."""

    raw: str
    exposed: str
    schema: dict[str, Any]
    read_only: bool
    #: How a rewrite turns the client's arguments into the upstream's (mcp_hub.rewrite).
    plan: ArgumentPlan | None = None


class ConnectionState:
    """Shared state of one upstream connection (see the module docstring).

    Its attributes are read and written by the supervisor and the parts of the
    same connection only; other modules see them through ``ServerConnection``.
    """

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        settings: HubSettings,
        registry: Any,
        hooks: ConnectionHooks,
    ) -> None:
        self.name = name
        self.config = config
        self.settings = settings
        self.registry = registry
        self.hooks = hooks
        self.toolset = upstream_toolset(name)
        self.prefix = config.effective_prefix(name)
        #: Every log line about this server carries ``server`` (``--log-format json``).
        self.log = logging.LoggerAdapter(logger, {"server": name})

        self.state = ServerState.CONNECTING if config.enabled else ServerState.DISABLED
        self.state_since = time.time()
        self.last_error: str | None = None
        self.reconnects = 0
        self.connect_ms: float | None = None
        self.server_info: types.Implementation | None = None
        self.capabilities: types.ServerCapabilities | None = None
        self.session: ClientSession | None = None
        #: The handshake session for 2025 clients beside a 2026-07-28 one, while the main
        #: session lives (mcp_hub.upstream.sessions.companion); None when there can be none.
        self.companion: Companion | None = None

        self.tools: dict[str, ToolRecord] = {}
        self.exposed: dict[str, str] = {}  # exposed → raw
        #: Every tool of the last listing as the upstream sent it (before include, exclude
        #: and rewrites): what ``mcp-hub check`` holds the rewrites against.
        self.listed: list[types.Tool] = []
        self.rejected: dict[str, str] = {}
        #: Exposed names hidden because their tool changed since it was pinned (policy block).
        self.pin_blocked: set[str] = set()
        self.prompts: list[types.Prompt] = []
        #: A 2026-07-28 upstream's cache hints per list kind: (ttlMs, cacheScope, listed at).
        self.list_hints: dict[str, ListHint] = {}
        self.resources: list[types.Resource] = []
        self.templates: list[types.ResourceTemplate] = []
        #: Whether a 2025 session serves Agent Skills (mcp_hub.upstream.skills_probe).
        self.skills_probe = SkillsProbe()
        #: Subscribed resource URIs: ``resources/subscribe`` on a handshake session, the
        #: listen stream's filter on a 2026-07-28 one (mcp_hub.upstream.sessions.listening).
        self.watched = WatchedUris()

        #: Set once the first attempt has finished (ready, parked or failed).
        self.first_done = anyio.Event()
        self.stopped = anyio.Event()
        self.session_changed = anyio.Event()
        self.lost = anyio.Event()
        self.lost_reason = ""
        self.refresh_wanted = anyio.Event()
        self.refresh_kinds: set[Kind] = set()
        #: Of those, the kinds the upstream itself said changed (``list_changed``).
        self.announced_kinds: set[Kind] = set()
        self.inflight: dict[int, InFlightCall] = {}
        self.ids = itertools.count()
        self.probe: TransportProbe | None = None

    def status(self) -> UpstreamStatus:
        """What ``mcp-hub status`` and the ops views show of this server."""
        info = None
        if self.server_info is not None:
            info = {"name": self.server_info.name, "version": self.server_info.version}
        return UpstreamStatus(
            name=self.name,
            state=self.state,
            transport=self.config.transport or "stdio",
            tools=len(self.tools),
            prompts=len(self.prompts),
            resources=len(self.resources),
            last_error=self.last_error,
            reconnects=self.reconnects,
            state_since=self.state_since,
            connect_ms=self.connect_ms,
            server_info=info,
            rejected_tools=self._rejections(),
            in_flight=len(self.inflight),
        )

    def _rejections(self) -> dict[str, str]:
        """Refused names, plus names another upstream took over after we registered them."""
        out = dict(self.rejected)
        for rec in self.tools.values():
            if rec.exposed in out:
                continue
            entry = self.registry.get_entry(rec.exposed)
            if entry is not None and entry.toolset != self.toolset:
                out[rec.exposed] = (
                    f"shadowed by toolset {entry.toolset!r} (later in servers.toml wins)"
                    if is_upstream_toolset(entry.toolset)
                    else f"name held by {entry.origin} tool of toolset {entry.toolset!r}")
        return out

    @property
    def pid(self) -> int | None:
        """Process id of the stdio child while one runs (it leads its own process group)."""
        probe = self.probe
        return probe.pid if probe is not None and self.config.transport == "stdio" else None

    def set_state(self, state: ServerState) -> None:
        """Enter lifecycle ``state`` (logged, and waiters are woken)."""
        if state is not self.state:
            self.state = state
            self.state_since = time.time()
            self.hooks.pulse()
            self.log.info("upstream %s: %s%s", self.name, state.value,
                        f" ({self.last_error})" if self.last_error and state in
                        (ServerState.RECONNECTING, ServerState.PARKED) else "")

    def supports(self, feature: str) -> bool:
        """Whether the upstream declared capability ``feature`` (tools, prompts, …)."""
        caps = self.capabilities
        return caps is not None and getattr(caps, feature, None) is not None

    def mark_lost(self, reason: str) -> None:
        """The live session is gone (first reason wins): the supervisor starts over."""
        if not self.lost.is_set():
            self.lost_reason = reason
            self.lost.set()
            self.hooks.pulse()

    def is_fatal(self, exc: MCPError) -> bool:
        """Whether ``exc`` means the session, not just this request, is dead."""
        return exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT) or (
            self.session_gone(exc))

    def session_gone(self, exc: MCPError) -> bool:
        """An HTTP 404 for our session id: the server restarted or expired the session."""
        if self.config.transport != "http":
            return False
        if exc.message in ("Session terminated", "Session not found"):
            return True
        probe = self.probe
        return probe is not None and probe.last_status == 404 and exc.code in (
            types.INVALID_REQUEST, types.REQUEST_TIMEOUT)

    def request_refresh(self, kind: Kind, *, announced: bool = False) -> None:
        """List ``kind`` again; ``announced``: because the upstream said it changed."""
        self.refresh_kinds.add(kind)
        if announced:
            self.announced_kinds.add(kind)
        self.refresh_wanted.set()

    def announce_session_change(self) -> None:
        """Wake every task waiting for a session (ready, lost or given up)."""
        event = self.session_changed
        self.session_changed = anyio.Event()
        event.set()
        self.hooks.pulse()

    def live(self) -> ClientSession | None:
        """The session, unless there is none or it was lost."""
        session = self.session
        return session if session is not None and not self.lost.is_set() else None

    def error_result(self, text: str) -> types.CallToolResult:
        """A tool result with ``isError`` saying ``text``."""
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    def unavailable(self) -> str:
        """Why no call can be sent now: the state and the last error."""
        text = f"Server '{self.name}' is {self.state.value}"
        if self.last_error:
            text += f": {self.last_error}"
        return text
