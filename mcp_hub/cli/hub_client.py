"""The CLI as a client of a running HTTP hub: ``status``, ``tools`` and ``call``.

A few plain HTTP requests, no MCP SDK: ``GET /status.json`` for ``status``; for
``tools`` and ``call`` one short Streamable HTTP session (``initialize``, the
request, ``DELETE``), whose answer may come as JSON or as one SSE stream. So a
call to a ready server costs the hub's own latency plus a Python start-up,
instead of starting every upstream of the config in the CLI's process. The
requests go through :mod:`mcp_hub.cli.plain_http` (the standard library on one
kept-alive connection): httpx's import and TLS set-up cost more than the call.

The token comes from ``--token`` or ``$MCP_HUB_TOKEN``; a hub that refuses the
request (401) gets an error naming both.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mcp_hub import __version__
from mcp_hub.cli.plain_http import TRANSPORT_ERRORS, Connection, Reply
from mcp_hub.hub_errors import HubError

__all__ = ["RemoteHub", "needs_token_message"]

PROTOCOL = "2025-06-18"
_ACCEPT = "application/json, text/event-stream"


def needs_token_message(base: str, token: str | None) -> str:
    """What to do when the hub at ``base`` answers 401."""
    if token:
        return (f"the hub at {base} refused the token (HTTP 401): check the value of "
                "--token or $MCP_HUB_TOKEN against [hub.http] auth_tokens")
    return (f"the hub at {base} needs a token (HTTP 401): set MCP_HUB_TOKEN=… in the "
            "environment or pass --token TOKEN (one of [hub.http] auth_tokens)")


def _messages(response: Reply) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response: a JSON body, or the ``data:`` of SSE events."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("text/event-stream"):
        found: list[dict[str, Any]] = []
        data: list[str] = []
        for line in [*response.text.splitlines(), ""]:
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
            elif not line and data:
                message = json.loads("\n".join(data))
                data = []
                if isinstance(message, dict):
                    found.append(message)
        return found
    if not response.content:
        return []
    body = response.json()
    return [m for m in (body if isinstance(body, list) else [body]) if isinstance(m, dict)]


@dataclass
class RemoteHub:
    """A running hub at ``base`` (``http://host:port``), reached with ``token``."""

    base: str
    token: str | None = None
    timeout: float = 600.0

    @contextlib.contextmanager
    def _reaching(self) -> Iterator[None]:
        try:
            yield
        except TRANSPORT_ERRORS as exc:
            raise HubError(f"cannot reach the hub at {self.base}: {exc or type(exc).__name__}"
                           ) from None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _check(self, response: Reply, what: str) -> None:
        if response.status_code == 401:
            raise HubError(needs_token_message(self.base, self.token))
        if response.status_code >= 400:
            raise HubError(f"{what}: the hub at {self.base} answered HTTP "
                           f"{response.status_code}: {response.text.strip()[:200]}")

    def status(self) -> dict[str, Any]:
        """``/status.json``: what this caller may see of the hub."""
        with self._reaching(), Connection(self.base, read_timeout=30) as http:
            response = http.get("/status.json", headers=self._headers())
        self._check(response, "status")
        data: dict[str, Any] = response.json()
        return data

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One MCP request in a session of its own; its ``result`` (an error raises)."""
        url = "/mcp"
        headers = {**self._headers(), "Accept": _ACCEPT}
        with self._reaching(), Connection(self.base, read_timeout=self.timeout,
                                          headers=headers) as http:
            opened = http.post(url, json_body={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                           "clientInfo": {"name": "mcp-hub-cli", "version": __version__}}})
            self._check(opened, "initialize")
            session = opened.headers.get("mcp-session-id")
            version = PROTOCOL
            for message in _messages(opened):
                version = str(message.get("result", {}).get("protocolVersion", version))
            more = {"mcp-protocol-version": version}
            if session:
                more["mcp-session-id"] = session
            try:
                done = http.post(url, headers=more, json_body={
                    "jsonrpc": "2.0", "method": "notifications/initialized"})
                self._check(done, "initialized")
                answer = http.post(url, headers=more, json_body={
                    "jsonrpc": "2.0", "id": 2, "method": method, "params": params})
                self._check(answer, method)
            finally:
                if session:  # else the session ends on the hub's idle timeout
                    with contextlib.suppress(*TRANSPORT_ERRORS):
                        http.delete(url, headers=more)
        for message in _messages(answer):
            if message.get("id") == 2:
                if "error" in message:
                    error = message["error"]
                    raise HubError(f"{method}: {error.get('message', error)}")
                result: dict[str, Any] = message.get("result", {})
                return result
        raise HubError(f"{method}: the hub at {self.base} sent no answer")

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the hub lists to this caller (all pages)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += result.get("tools", [])
            cursor = result.get("nextCursor")
            if not cursor:
                return tools

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The result of ``tools/call`` (a tool error is a result with ``isError``)."""
        return self.request("tools/call", {"name": name, "arguments": arguments})
