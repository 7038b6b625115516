"""The per-call context handed to tool handlers as the ``call`` keyword.

A tool call arrives from one downstream session. Whatever the tool needs from
that session — progress reporting, log messages, and the server-to-client
requests an upstream may make while it runs (sampling, elicitation,
roots/list) — goes through this object, so handlers never touch transport
details. :class:`CallContext` itself has no downstream: every request fails
with a clear MCP error, which is what an upstream must receive when no client
can answer (``mcp-hub call``, tests). The serving side subclasses it.

This module imports nothing of the project, so tools and upstream code can use
it freely.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_REQUEST,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ListRootsResult,
    LoggingLevel,
)

__all__ = ["INPUT_KEY", "CallContext", "NoClientError", "ToolHub"]

#: The key a 2026-07-28 upstream gave the input request being relayed now (its
#: ``inputRequests`` key); a hub input round that asks its own client in turn
#: uses the same key, so the client sees the upstream's names.
INPUT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mcp_hub_input_key", default=None)


class ToolHub(Protocol):
    """What a builtin tool may ask of the Hub that runs it (``call.hub``): the caller's status.

    The Hub satisfies it structurally (:mod:`mcp_hub.hub.interface` names the serving
    side's larger interface next to it).
    """

    def status(self, profile: Any = None) -> dict[str, Any]:
        """The hub's status as ``profile`` (a :class:`mcp_hub.hub.access.Caller`) may see it."""
        ...


class NoClientError(MCPError):
    """Raised when a request needs a downstream client that cannot answer it."""

    def __init__(self, what: str) -> None:
        super().__init__(INVALID_REQUEST, f"{what} is not available: no downstream client can answer")


@dataclass
class CallContext:
    """What one tool call knows about the downstream request that caused it."""

    tool_name: str = ""
    request_id: str | int | None = None
    progress_token: str | int | None = None
    client_capabilities: ClientCapabilities | None = None
    client_name: str | None = None
    #: The downstream session object, for code that must key state by session.
    session: Any = None
    #: The Hub, for builtin tools that report on it (``hub_status``).
    hub: ToolHub | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # -- how the request arrived (telemetry: trace context in, span attributes) ----------
    #: The request's ``_meta`` as the client sent it (``traceparent``/``tracestate``).
    meta: Mapping[str, Any] | None = None
    #: The HTTP request's headers, when it came over HTTP.
    headers: Mapping[str, str] | None = None
    #: ``network.transport``: "pipe" (stdio) or "tcp" (HTTP, SSE).
    transport: str = "pipe"
    protocol_version: str | None = None
    session_id: str | None = None
    #: The call's span while telemetry traces it (:class:`mcp_hub.telemetry.CallSpan`).
    trace: Any = None
    #: The signed-in identity's name (set by the Hub from the caller), for per-user upstreams.
    identity: str | None = None
    #: The :class:`mcp_hub.hub.access.Caller` the Hub runs this call for (``hub_status`` shows
    #: only what it reaches).
    caller: Any = None
    #: The ``task`` parameter of a task-augmented ``tools/call`` (2025-11-25 tasks), passed on
    #: to the upstream; the upstream's name and its ``CreateTaskResult`` land in
    #: :attr:`created_task`.
    task: dict[str, Any] | None = None
    created_task: tuple[str, dict[str, Any]] | None = None
    #: The client declared the 2026-07-28 tasks extension: the upstream may answer this
    #: call with a flat ``CreateTaskResult`` (``resultType: "task"``), kept the same way.
    task_extension: bool = False

    def claims(self) -> dict[str, str]:
        """The identity claims a rewritten argument may use: ``sub``, ``email``, ``name``
        (from the caller's attributes: ``sub:alice``, ``email:a@example.com``)."""
        claims: dict[str, str] = {"name": self.identity} if self.identity else {}
        for attr in getattr(self.caller, "attributes", ()):
            key, _, value = attr.partition(":")
            if key in ("sub", "email") and value:
                claims[key] = value
        return claims

    # -- capabilities --------------------------------------------------------------
    @property
    def can_sample(self) -> bool:
        caps = self.client_capabilities
        return caps is not None and caps.sampling is not None

    @property
    def can_elicit(self) -> bool:
        caps = self.client_capabilities
        return caps is not None and caps.elicitation is not None

    @property
    def can_list_roots(self) -> bool:
        caps = self.client_capabilities
        return caps is not None and caps.roots is not None

    # -- notifications to the downstream client ---------------------------------------
    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Forward progress to the client if it asked for it (has a progress token)."""
        return None

    async def log(self, level: LoggingLevel, data: Any, logger: str | None = None) -> None:
        """Send a log message to the client, subject to its logging/setLevel."""
        return None

    async def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client a URL elicitation finished (``notifications/elicitation/complete``)."""
        return None

    # -- requests to the downstream client ----------------------------------------------
    async def create_message(self, params: CreateMessageRequestParams) -> CreateMessageResult:
        """Relay a sampling request to the client whose call is running."""
        raise NoClientError("sampling/createMessage")

    async def elicit(self, params: ElicitRequestParams) -> ElicitResult:
        """Relay an elicitation request to the client whose call is running."""
        raise NoClientError("elicitation/create")

    async def list_roots(self) -> ListRootsResult:
        """Relay roots/list to the client whose call is running."""
        raise NoClientError("roots/list")
