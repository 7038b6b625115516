"""Messages between hub replicas for sessions whose requests land on several of them.

Behind a round-robin load balancer one session's messages are spread over the
replicas, but some must reach the replica holding a particular stream:

* the client's **answer** to a server-to-client request (sampling, elicitation,
  roots) made within a call, and a **cancel** of a call, must reach the
  replica running that call: :class:`BusTap` publishes every POST that carries
  a response or ``notifications/cancelled``, and each replica that has the
  session hands it to its copy, or to the HTTP fast-path call it runs
  (:attr:`ReplicaBus.local_takers`); a replica that did not send the request,
  or does not run the call, drops it as the SDK drops any unknown id;
* a **notification** for the session's GET stream (list_changed, resource
  updates, log messages) produced on a replica that does not hold that stream
  is published too, and the replica holding it writes it there. A
  list_changed already sent on that stream within the last second is not
  sent again (every replica usually sees the same upstream change).

The bus is the state backend's (:mod:`mcp_hub.state`): Redis pub/sub between
replicas, or the process itself with the embedded backend.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from mcp.server.streamable_http import GET_STREAM_KEY, StreamableHTTPServerTransport
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_hub.compat.sdk_http import (
    HookedSessionManager,
    read_stream_writer,
    request_streams,
    transport_write_stream,
)
from mcp_hub.downstream.http.body import request_body
from mcp_hub.downstream.replicas.sealed_session import session_credential
from mcp_hub.state import StateBackend, StateUnavailable

__all__ = ["BusTap", "ReplicaBus"]

logger = logging.getLogger(__name__)

_DEDUPE_SECONDS = 1.0


class ReplicaBus:
    """Publishes session messages other replicas need; delivers those this one can."""

    def __init__(self, state: StateBackend, managers: Iterable[HookedSessionManager]
                 ) -> None:
        self.replica = os.urandom(6).hex()
        self.state = state
        self.managers = list(managers)
        self._recent: dict[tuple[str, str], float] = {}
        self.counts = {"published": 0, "delivered": 0, "failed": 0}
        #: Called with (session id, stream id) when another replica replayed a dropped stream.
        self.on_resumed: Callable[[str, str], None] | None = None
        #: Tried first with (session id, message) for each client message from another
        #: replica; True when it took the message (the HTTP fast path's own calls: an
        #: answer to a request it sent, a cancel of a call it runs).
        self.local_takers: list[Callable[[str, dict[str, Any]], bool]] = []
        #: Handlers of further kinds of message, not tied to a session (kind -> handler).
        self.handlers: dict[str, Callable[[Any], Awaitable[None]]] = {}
        state.on_message(self._received)

    def _transport(self, session_id: str) -> StreamableHTTPServerTransport | None:
        for manager in self.managers:
            found = manager.transports.get(session_id)
            if found is not None:
                return found
        return None

    async def _publish(self, kind: str, session_id: str, message: Any) -> None:
        data = json.dumps({"r": self.replica, "k": kind, "s": session_id, "m": message},
                          separators=(",", ":")).encode()
        try:
            await self.state.publish(data)
        except StateUnavailable:
            self.counts["failed"] += 1
            logger.warning("a message for another replica was not sent: the state store "
                           "is unavailable")
            return
        self.counts["published"] += 1

    async def send(self, kind: str, message: Any) -> None:
        """Publish ``message`` of one of the :attr:`handlers`' kinds to every replica."""
        await self._publish(kind, "", message)

    async def client_message(self, session_id: str, body: bytes) -> None:
        """A POST of ``session_id`` carried an answer or a cancel: tell every replica."""
        try:
            raw = json.loads(body)
        except ValueError:
            return
        await self._publish("in", session_id, raw)

    async def standalone(self, session_id: str, message: JSONRPCMessage) -> None:
        """A message for the session's GET stream; forwarded if another replica holds it."""
        transport = self._transport(session_id)
        method = getattr(message, "method", None)
        if transport is not None and GET_STREAM_KEY in request_streams(transport):
            if isinstance(method, str):
                self._recent[(session_id, method)] = time.monotonic()
            return
        await self._publish("out", session_id, message.model_dump(
            mode="json", by_alias=True, exclude_none=True))

    async def _received(self, data: bytes) -> None:
        try:
            envelope = json.loads(data)
            if envelope.get("r") == self.replica:
                return
            session_id, kind, raw = str(envelope["s"]), envelope["k"], envelope["m"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        handler = self.handlers.get(kind)
        if handler is not None:
            await handler(raw)
            return
        if kind == "in" and self.local_takers:
            raw = self._take_locally(session_id, raw)
            if not raw:
                return
        transport = self._transport(session_id)
        if transport is None:
            return
        if kind == "resumed":
            if self.on_resumed is not None:
                self.on_resumed(session_id, str(raw))
            return
        if kind == "end":
            self._end(session_id)
            return
        for item in raw if isinstance(raw, list) else [raw]:
            try:
                message = jsonrpc_message_adapter.validate_python(item, by_name=False)
            except ValidationError:
                continue
            if kind == "in":
                await self._deliver_in(transport, message)
            elif kind == "out":
                await self._deliver_out(session_id, transport, message)

    def _take_locally(self, session_id: str, raw: Any) -> list[Any]:
        """Hand client messages to :attr:`local_takers`; what none of them took."""
        left = []
        for item in raw if isinstance(raw, list) else [raw]:
            if isinstance(item, dict) and any(take(session_id, item) for take in self.local_takers):
                self.counts["delivered"] += 1
            else:
                left.append(item)
        return left

    async def _deliver_in(self, transport: StreamableHTTPServerTransport,
                          message: JSONRPCMessage) -> None:
        writer = read_stream_writer(transport)
        if writer is None or transport.is_terminated:
            return
        try:
            await writer.send(SessionMessage(message))
        except Exception:
            logger.debug("a forwarded client message found its session closing", exc_info=True)
            return
        self.counts["delivered"] += 1

    async def _deliver_out(self, session_id: str, transport: StreamableHTTPServerTransport,
                           message: JSONRPCMessage) -> None:
        if GET_STREAM_KEY not in request_streams(transport) or transport_write_stream(transport) is None:
            return
        method = getattr(message, "method", None)
        if isinstance(method, str) and method.endswith("list_changed"):
            now = time.monotonic()
            if now - self._recent.get((session_id, method), float("-inf")) < _DEDUPE_SECONDS:
                return
        try:
            await transport_write_stream(transport).send(SessionMessage(message))
        except Exception:
            logger.debug("a forwarded notification found its session closing", exc_info=True)
            return
        self.counts["delivered"] += 1

    async def stream_resumed(self, session_id: str, stream_id: str) -> None:
        """This replica replayed a stream another replica served: its call must not be cancelled."""
        await self._publish("resumed", session_id, stream_id)

    async def session_closed(self, session_id: str) -> None:
        """A client ended ``session_id`` here: other replicas end their copies."""
        await self._publish("end", session_id, None)

    def _end(self, session_id: str) -> None:
        for manager in self.managers:
            evict = getattr(manager, "evict", None)
            if session_id in manager.transports and callable(evict):
                evict(session_id)
                self.counts["delivered"] += 1

    def stats(self) -> dict[str, Any]:
        return {"replica": self.replica, **self.counts}


def _needs_routing(body: bytes) -> bool:
    """Whether a POST body carries a response/error or a cancel (cheap byte test first)."""
    if b"notifications/cancelled" in body:
        return True
    return b'"method"' not in body and (b'"result"' in body or b'"error"' in body)


class BusTap:
    """Publishes the POSTs other replicas may need (answers and cancels), then serves them."""

    def __init__(self, app: ASGIApp, *, bus: ReplicaBus,
                 owns: Callable[[str, str, str], bool]) -> None:
        self.app = app
        self.bus = bus
        #: (session id, Authorization, endpoint) -> whether this caller may speak for the session.
        self.owns = owns

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope.get("method") != "POST"
                or not scope.get("path", "").endswith("/mcp")):
            await self.app(scope, receive, send)
            return
        sid = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-session-id"),
                   None)
        if sid is None:
            await self.app(scope, receive, send)
            return
        body = request_body(scope)
        if _needs_routing(body):
            auth = session_credential(scope)
            # Only the session's own credential may answer or cancel on its behalf.
            if self.owns(sid, auth, scope.get("path", "")):
                await self.bus.client_message(sid, body)
        await self.app(scope, receive, send)
