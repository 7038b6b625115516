"""Server-to-client requests and notifications of one upstream, relayed downstream.

Sampling, elicitation, roots/list and log messages from the upstream go to the
:class:`~mcp_hub.pipeline.context.CallContext` of the call that caused them. Over
Streamable HTTP the SDK delivers them in the context of that request, so the
routing is exact; on stdio and SSE the wire does not say, and the rule is: the
most recent call in flight on that server whose downstream client has the
capability. With none, the upstream gets an error response saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp.types as types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.skills import namespaced_uri
from mcp_hub.telemetry import relay_span
from mcp_hub.upstream.conn_state import ConnectionState
from mcp_hub.upstream.failures import error_text
from mcp_hub.upstream.in_flight import InFlightCall, current_call

__all__ = ["Relays", "cannot_relay", "relayed"]

Log = logging.Logger | logging.LoggerAdapter[logging.Logger]

RelayT = TypeVar("RelayT")


class Relays:
    """Answers the upstream's requests to the client (see the module docstring).

    One per connection, over its :class:`ConnectionState`: the ``on_*`` methods are
    the callbacks of the connection's sessions.
    """

    __slots__ = ("shared",)

    def __init__(self, shared: ConnectionState) -> None:
        self.shared = shared

    def _route(self, capable: Callable[[CallContext], bool] | None) -> InFlightCall | None:
        shared = self.shared
        current = current_call.get()
        if current is not None and current.conn is shared:
            # The transport told us which call caused this: never hand it to another client.
            call = current.call
            ok = call is not None and (capable is None or capable(call))
            return current if ok else None
        for record in reversed(shared.inflight.values()):
            if record.call is not None and (capable is None or capable(record.call)):
                return record
        return None

    def _no_client(self, what: str, capability: str) -> types.ErrorData:
        shared = self.shared
        if not shared.inflight:
            why = "no downstream call is in flight on this server"
        else:
            why = f"no downstream client with a call in flight supports {capability}"
        return cannot_relay(what, why)

    async def _relay(
        self, record: InFlightCall, what: str, fn: Callable[[], Awaitable[RelayT]]
    ) -> RelayT | types.ErrorData:
        shared = self.shared
        with record.paused(), relay_span(record.call, what):
            return await relayed(shared.log, shared.name, what, fn())

    async def on_sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        record = self._route(lambda c: c.can_sample)
        if record is None or record.call is None:
            return self._no_client("sampling/createMessage", "sampling")
        call = record.call
        # A task-augmented request is answered at once (mcp_hub.upstream.sessions.lenient): the
        # client is asked plainly, and its answer goes back as the request's result.
        plain = params.model_copy(update={"task": None}) if params.task is not None else params
        return await self._relay(record, "sampling/createMessage",
                                 lambda: call.create_message(plain))

    async def on_elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        record = self._route(lambda c: c.can_elicit)
        if record is None or record.call is None:
            return self._no_client("elicitation/create", "elicitation")
        call = record.call
        plain = params.model_copy(update={"task": None}) if params.task is not None else params
        return await self._relay(record, "elicitation/create", lambda: call.elicit(plain))

    async def on_list_roots(
        self, context: ClientRequestContext
    ) -> types.ListRootsResult | types.ErrorData:
        shared = self.shared
        record = self._route(lambda c: c.can_list_roots)
        if record is None or record.call is None:
            if shared.hooks.roots is not None:
                # Outside a call (or for a client without roots): the hub answers.
                return shared.hooks.roots()
            return self._no_client("roots/list", "roots")
        call = record.call
        return await self._relay(record, "roots/list", call.list_roots)

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        shared = self.shared
        record = self._route(None)
        if record is not None and record.call is not None:
            await record.call.log(params.level, params.data, params.logger)
        elif shared.hooks.log is not None:
            await shared.hooks.log(shared.name, params)

    async def on_message(self, message: Any) -> None:
        shared = self.shared
        if isinstance(message, Exception):
            text = (f"invalid message ({message.error_count()} validation errors)"
                    if isinstance(message, ValidationError) else error_text(message))
            shared.log.warning("upstream %s: transport error: %s", shared.name, text)
            return
        if isinstance(message, types.ToolListChangedNotification):
            shared.request_refresh("tools", announced=True)
        elif isinstance(message, types.PromptListChangedNotification):
            shared.request_refresh("prompts", announced=True)
        elif isinstance(message, types.ResourceListChangedNotification):
            shared.request_refresh("resources", announced=True)
        elif (isinstance(message, types.ResourceUpdatedNotification)
              and shared.hooks.resource_updated is not None):
            # A 2025 session's notification, or a frame of a 2026-07-28 listen stream.
            # An app address is announced as the hub lists it (mcp_hub.protocol.apps).
            await shared.hooks.resource_updated(namespaced_uri(shared.name, str(message.params.uri)))


def cannot_relay(what: str, why: str) -> types.ErrorData:
    """The error an upstream gets when no downstream client can answer its request."""
    return types.ErrorData(code=types.INVALID_REQUEST,
                           message=f"mcp-hub cannot relay {what}: {why}")


async def relayed(log: Log, server: str, what: str, asked: Awaitable[RelayT]
                  ) -> RelayT | types.ErrorData:
    """The downstream client's answer to an upstream's request, or the error to send back
    to the upstream (the client's own error, or why the relay failed)."""
    try:
        return await asked
    except MCPError as exc:
        return exc.error
    except Exception as exc:
        log.warning("upstream %s: relaying %s failed: %s", server, what, error_text(exc))
        return types.ErrorData(code=types.INTERNAL_ERROR,
                               message=f"mcp-hub could not relay {what}: {error_text(exc)}")

