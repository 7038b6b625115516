"""One HTTP fast-path call's way back to its client (see :mod:`.http_fastpath`).

The answer is a plain JSON body, unless the call needs the client before it ends:
then the response becomes an SSE stream — log messages, progress and the hub's
own requests (sampling, elicitation, roots) as events, the result as the last
one. The client's answers to those requests come back as POSTs that the fast
path hands to :meth:`HttpChannel` via ``fast.pending``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    ClientCapabilities,
)
from starlette.types import Send

from mcp_hub.downstream.call_context import JsonRpcDownstream, RelayCallContext
from mcp_hub.downstream.fast_call import encode_message
from mcp_hub.downstream.stdio.fastpath import _Pending
from mcp_hub.protocol.log_levels import client_log_level


class ChannelSession(Protocol):
    """What a channel needs of the fast path's session (``http_fastpath.FastSession``)."""

    @property
    def sid(self) -> str: ...
    @property
    def connection(self) -> Any: ...
    @property
    def version(self) -> str: ...


class ChannelOwner(Protocol):
    """What a channel needs of the fast path (``http_fastpath.HttpFastPath``): the hub,
    the ids of the requests it sends the client, and where their answers wait."""

    @property
    def hub(self) -> Any: ...
    @property
    def pending(self) -> dict[tuple[str, str], _Pending]: ...

    def next_request_id(self) -> str:
        """A fresh id for a request to the client."""
        ...

__all__ = ["HttpChannel", "send_accepted", "send_json", "send_json_parts"]

logger = logging.getLogger(__name__)

_REQUEST_TIMEOUT = 600.0
_JSON_HEADERS = [(b"content-type", b"application/json")]
_GZIP_HEADERS = [(b"content-encoding", b"gzip"), (b"vary", b"accept-encoding")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache, no-transform"),
                (b"x-accel-buffering", b"no")]


async def send_json(send: Send, sid: str, body: bytes, gzipped: bool = False) -> None:
    """A 200 with a JSON body (``gzipped``: the body is its gzip encoding)."""
    await send_json_parts(send, sid, (body,), gzipped)


async def send_json_parts(send: Send, sid: str, parts: tuple[bytes, ...],
                          gzipped: bool = False) -> None:
    """A 200 whose JSON body is ``parts`` joined, sent part by part (nothing is copied)."""
    await send({"type": "http.response.start", "status": 200, "headers": [
        *_JSON_HEADERS, (b"content-length", str(sum(map(len, parts))).encode()),
        (b"mcp-session-id", sid.encode("latin-1")), *(_GZIP_HEADERS if gzipped else ())]})
    last = len(parts) - 1
    for n, part in enumerate(parts):
        await send({"type": "http.response.body", "body": part, "more_body": n < last})


async def send_accepted(send: Send) -> None:
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


class HttpChannel(JsonRpcDownstream):
    """One fast-path call's way back to the client: a JSON body, or an SSE stream once needed."""

    def __init__(self, fast: ChannelOwner, session: ChannelSession, send: Send) -> None:
        self.fast = fast
        self.hub = fast.hub
        self.session = session
        self._send = send
        self.streaming = False
        params = session.connection.client_params
        self.capabilities: ClientCapabilities | None = session.connection.client_capabilities
        info = getattr(params, "client_info", None)
        self.client_name: str | None = getattr(info, "name", None)

    def context(self, rid: Any, name: str, meta: dict[str, Any] | None = None,
                headers: Mapping[str, str] | None = None) -> RelayCallContext:
        """The call's context: the one relay context of every transport, over this channel.

        ``meta`` and ``headers`` carry the client's trace context, as on the SDK path.
        """
        return RelayCallContext(self, tool_name=name, request_id=rid, progress_token=None,
                                client_capabilities=self.capabilities, client_name=self.client_name,
                                session=self.session.connection, hub=self.hub, meta=meta,
                                headers=headers, transport="tcp",
                                protocol_version=self.session.version, session_id=self.session.sid)

    # the Downstream of mcp_hub.downstream.call_context
    def log_threshold(self) -> str | None:
        return client_log_level(getattr(self.session.connection, "state", None))

    async def _event(self, message: dict[str, Any]) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": [
                *_SSE_HEADERS, (b"mcp-session-id", self.session.sid.encode("latin-1"))]})
        data = b"event: message\r\ndata: " + encode_message(message) + b"\r\n\r\n"
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._event({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        """Send a server-to-client request on this call's stream; wait (bounded) for its answer."""
        rid = self.fast.next_request_id()
        key = (self.session.sid, rid)
        pending = self.fast.pending[key] = _Pending()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        try:
            await self._event(message)
            with anyio.fail_after(_REQUEST_TIMEOUT):
                await pending.done.wait()
        except BaseException:
            if not pending.done.is_set():
                with anyio.move_on_after(2, shield=True):
                    await self.notify("notifications/cancelled",
                                      {"requestId": rid, "reason": "the request was abandoned"})
            raise
        finally:
            self.fast.pending.pop(key, None)
        if pending.error is not None:
            raise MCPError(int(pending.error.get("code", INTERNAL_ERROR)),
                           str(pending.error.get("message", "error")), pending.error.get("data"))
        return pending.result

    async def finish(self, message: dict[str, Any] | None) -> None:
        """The answer: a JSON body, or the last event of the stream (none if cancelled)."""
        try:
            if not self.streaming:
                if message is None:  # cancelled before anything was sent: an empty stream
                    self.streaming = True
                    await self._send({"type": "http.response.start", "status": 200,
                                      "headers": _SSE_HEADERS})
                else:
                    await send_json(self._send, self.session.sid, encode_message(message))
                    return
            elif message is not None:
                await self._event(message)
            await self._send({"type": "http.response.body", "body": b""})
        except OSError:
            logger.debug("the client went away before its answer was written", exc_info=True)
