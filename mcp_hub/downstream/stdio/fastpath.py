"""The stdio fast path for ``tools/call``: the hub's hot path without the SDK's server stack.

A proxied call costs the hub a server's work and a client's work. On the
server side, the SDK's dispatcher, runner, middleware and the request/response
models are most of it. Over stdio the hub's own transport
(:mod:`mcp_hub.downstream.stdio.transport`) hands ``tools/call`` requests here instead:
the request is parsed once, runs through :meth:`Hub.call_tool` — the same call
pipeline, validation, hooks, size cap and metrics — and the result is written
back after the same per-version shaping the SDK applies.

Lists (``tools/list``, ``prompts/list``, ``resources/list``,
``resources/templates/list``) are written from prepared bytes
(:mod:`.prepared_lists`). Everything else (the handshake, prompts, resources,
pings, the 2026-07-28 era) stays with the SDK server. The fast path only serves a
connection after it has seen its ``initialize`` request, and it relays what a
call needs from the client itself: progress notifications, log messages (at
the level the client set), cancellation, and server-to-client requests
(sampling, elicitation, roots) whose answers it picks out of the input stream.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    ClientCapabilities,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.downstream.call_context import JsonRpcDownstream, RelayCallContext
from mcp_hub.downstream.fast_call import call_message
from mcp_hub.downstream.jsonrpc import is_request_id
from mcp_hub.downstream.lists.prepared import LIST_METHODS, ListKind, prepared_lists
from mcp_hub.hub.access import as_caller
from mcp_hub.hub.interface import ServingHub
from mcp_hub.protocol.log_levels import LOG_LEVELS, client_log_level, set_client_log_level

__all__ = ["StdioFastPath"]

logger = logging.getLogger(__name__)

SendRaw = Callable[[bytes], Awaitable[None]]
_REQUEST_TIMEOUT = 600.0


def _encode(message: dict[str, Any]) -> bytes:
    """One JSON-RPC line; text that cannot be encoded (a lone surrogate) is escaped."""
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"


class _Pending:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: dict[str, Any] | None = None


class StdioFastPath(JsonRpcDownstream):
    """Serves ``tools/call`` on one stdio connection; see the module docstring."""

    def __init__(self, hub: ServingHub, profile: str | None, send_raw: SendRaw,
                 tg: anyio.abc.TaskGroup) -> None:
        self.hub = hub
        self.profile = profile
        self.send_raw = send_raw
        self.tg = tg
        self.capabilities: ClientCapabilities | None = None
        self.client_name: str | None = None
        self.version: str | None = None
        #: This connection's state, as the SDK keeps one per connection (the logging level).
        self.state: dict[str, Any] = {}
        self._init_id: Any = None
        self._calls: dict[Any, anyio.CancelScope] = {}
        self._pending: dict[str, _Pending] = {}
        self._ids = itertools.count(1)
        self._closing = False

    # ---------------------------------------------------------------- input side
    def wants(self, line: bytes) -> bool:
        """A cheap pre-filter: could this line be for the fast path?"""
        if self._pending and (b'"result"' in line or b'"error"' in line):
            return True
        return (b'"tools/call"' in line or b'"initialize"' in line or b'"notifications/cancelled"' in line
                or b'"logging/setLevel"' in line or b'/list"' in line)

    def intercept(self, raw: Any) -> bool:
        """Handle ``raw`` (a parsed message); False leaves it to the SDK server."""
        if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
            return False
        method = raw.get("method")
        params = raw.get("params")
        if method is None:
            rid = raw.get("id")
            pending = self._pending.pop(rid, None) if isinstance(rid, str) else None
            if pending is None:
                return False
            pending.result = raw.get("result")
            error = raw.get("error")
            pending.error = error if isinstance(error, dict) else None
            pending.done.set()
            return True
        if method == "initialize" and isinstance(params, dict):
            self._seen_initialize(raw.get("id"), params)
            return False
        if method == "logging/setLevel" and isinstance(params, dict):
            level = params.get("level")
            if isinstance(level, str) and level in LOG_LEVELS:
                set_client_log_level(self.state, level)
            return False
        if method == "notifications/cancelled" and isinstance(params, dict):
            target = params.get("requestId")
            if not is_request_id(target):
                return False
            assert isinstance(target, (str, int))
            scope = self._calls.get(coerce_request_id(target))
            if scope is None:
                return False
            scope.cancel()
            return True
        if method == "tools/call" and self.version is not None:
            return self._start_call(raw.get("id"), params)
        if method in LIST_METHODS and self.version is not None:
            return self._start_list(raw.get("id"), method, params)
        return False

    def _seen_initialize(self, rid: Any, params: dict[str, Any]) -> None:
        try:
            self.capabilities = ClientCapabilities.model_validate(params.get("capabilities") or {})
        except Exception:
            self.capabilities = None
            return
        info = params.get("clientInfo")
        self.client_name = info.get("name") if isinstance(info, dict) else None
        self._init_id = rid

    def outgoing(self, message: Any) -> None:
        """Watch what the SDK server writes: the initialize answer fixes the version."""
        if self._init_id is None:
            return
        rid = getattr(message, "id", None)
        result = getattr(message, "result", None)
        if rid == self._init_id and isinstance(result, dict):
            version = result.get("protocolVersion")
            if isinstance(version, str) and version not in MODERN_PROTOCOL_VERSIONS:
                self.version = version
            self._init_id = None

    def _start_call(self, rid: Any, params: Any) -> bool:
        if (self._closing or not is_request_id(rid) or coerce_request_id(rid) in self._calls
                or not isinstance(params, dict)):
            return False
        name = params.get("name")
        arguments = params.get("arguments", {})
        meta = params.get("_meta")
        if not isinstance(name, str) or not isinstance(arguments, dict) or (
                meta is not None and not isinstance(meta, dict)) or "task" in params:
            return False  # a task-augmented call: the SDK path (mcp_hub.hub.tasks)
        token = meta.get("progressToken") if meta else None
        if token is not None and not is_request_id(token):
            return False
        scope = anyio.CancelScope()
        self._calls[coerce_request_id(rid)] = scope
        self.tg.start_soon(self._run, rid, name, arguments, token, scope, meta)
        return True

    def close(self) -> None:
        """The input ended: calls in flight end with "Connection closed", as on the SDK path."""
        if self._closing:
            return
        self._closing = True
        for scope in list(self._calls.values()):
            scope.cancel()
        for pending in list(self._pending.values()):
            pending.error = {"code": CONNECTION_CLOSED, "message": "Connection closed"}
            pending.done.set()
        self._pending.clear()

    # ---------------------------------------------------------------- the call
    async def _run(self, rid: Any, name: str, arguments: dict[str, Any], token: Any,
                   scope: anyio.CancelScope, meta: dict[str, Any] | None = None) -> None:
        data: bytes | None = None
        try:
            with scope:
                call = RelayCallContext(
                    self, tool_name=name, request_id=rid, progress_token=token,
                    client_capabilities=self.capabilities, client_name=self.client_name,
                    session=self, hub=self.hub, meta=meta, protocol_version=self.version)
                assert self.version is not None
                data = _encode(await call_message(self.hub, self.profile, self.version, rid, name,
                                                  arguments, call))
        finally:
            self._calls.pop(coerce_request_id(rid), None)
        if scope.cancel_called:
            if not self._closing:
                return  # the client cancelled: no response, as the spec says
            data = _encode({"jsonrpc": "2.0", "id": rid,
                            "error": {"code": CONNECTION_CLOSED, "message": "Connection closed"}})
        if data is not None:
            await self.send_raw(data)

    def _start_list(self, rid: Any, method: str, params: Any) -> bool:
        """A list is answered from prepared bytes (:mod:`.prepared_lists`)."""
        if self._closing or not is_request_id(rid) or (params is not None and not isinstance(params, dict)):
            return False
        cursor = (params or {}).get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            return False
        self.tg.start_soon(self._list, rid, LIST_METHODS[method], cursor, method, params)
        return True

    async def _list(self, rid: Any, kind: ListKind, cursor: str | None, method: str = "",
                    params: Any = None) -> None:
        assert self.version is not None
        head = b'{"jsonrpc":"2.0","id":' + _encode(rid).rstrip(b"\n") + b',"result":'
        try:
            with self.hub.telemetry.request(method, None, request_id=rid, meta=(params or {}).get(
                    "_meta"), protocol_version=self.version):  # its span (mcp_hub.telemetry)
                body = await prepared_lists(self.hub).result(kind, as_caller(self.profile),
                                                             self.version, cursor)
            data = b"".join((head, body, b"}\n"))  # one copy of a large answer
        except MCPError as exc:
            data = _encode({"jsonrpc": "2.0", "id": rid, "error": exc.error.model_dump(
                by_alias=True, mode="json", exclude_none=True)})
        await self.send_raw(data)

    # ---------------------------------------------------------------- output side
    # (the Downstream of mcp_hub.downstream.call_context: one RelayCallContext per call)
    def log_threshold(self) -> str | None:
        return client_log_level(self.state)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send_raw(_encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def request(self, method: str, params: dict[str, Any] | None) -> Any:
        """Send a server-to-client request and wait for its answer (bounded)."""
        rid = f"mcp-hub-{next(self._ids)}"
        pending = self._pending[rid] = _Pending()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        if self._closing:
            raise MCPError(CONNECTION_CLOSED, "Connection closed")
        try:
            await self.send_raw(_encode(message))
            with anyio.fail_after(_REQUEST_TIMEOUT):
                await pending.done.wait()
        except BaseException:
            if not pending.done.is_set() and not self._closing:
                # Abandoned (the call was cancelled, or no answer in time): tell the
                # client, so its dialog does not stay open, as the SDK does.
                with anyio.move_on_after(2, shield=True):
                    await self.notify("notifications/cancelled",
                                      {"requestId": rid, "reason": "the request was abandoned"})
            raise
        finally:
            self._pending.pop(rid, None)
        if pending.error is not None:
            raise MCPError(int(pending.error.get("code", INTERNAL_ERROR)),
                           str(pending.error.get("message", "error")), pending.error.get("data"))
        return pending.result
