"""The loopback listener ``mcp-hub login`` waits on for the authorization redirect.

It answers one ``GET /callback?code=…&state=…`` (or ``error=…``) on 127.0.0.1 with
a short page and hands the parameters to the OAuth flow; anything else gets 404.
"""

from __future__ import annotations

import html
from urllib.parse import parse_qs, urlparse

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.auth import AuthorizationCodeResult

from mcp_hub.upstream.oauth.errors import OAuthError

__all__ = ["CallbackServer"]

_MAX_REQUEST = 16 * 1024


class CallbackServer:
    """Listens on a loopback port; :meth:`wait` returns the authorization response."""

    def __init__(self, listener: anyio.abc.SocketListener) -> None:
        self.listener = listener
        self.port: int = listener.extra(anyio.abc.SocketAttribute.local_port)
        self._send, self._receive = anyio.create_memory_object_stream[
            AuthorizationCodeResult | OAuthError](1)

    @classmethod
    async def open(cls, port: int = 0) -> CallbackServer:
        try:
            listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        except OSError as exc:
            raise OAuthError(f"cannot listen on 127.0.0.1:{port} for the login redirect: "
                             f"{exc.strerror or exc}") from None
        return cls(listener.listeners[0])  # type: ignore[arg-type]

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def serve(self) -> None:
        """Accept connections until cancelled."""
        await self.listener.serve(self._handle)

    async def wait(self) -> AuthorizationCodeResult:
        result = await self._receive.receive()
        if isinstance(result, OAuthError):
            raise result
        return result

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            data = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
                    chunk = await stream.receive()
                    if not chunk:
                        break
                    data += chunk
            line = data.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            url = urlparse(parts[1]) if len(parts) >= 2 and parts[0] == "GET" else None
            if url is None or url.path != "/callback":
                await _reply(stream, 404, "Not found.")
                return
            await _reply(stream, 200, await _deliver(self._send, parse_qs(url.query)))


async def _deliver(send: MemoryObjectSendStream[AuthorizationCodeResult | OAuthError],
                   query: dict[str, list[str]]) -> str:
    def one(key: str) -> str | None:
        return query.get(key, [None])[0]

    code, error = one("code"), one("error")
    if code is None:
        text = error or "no code in the redirect"
        desc = one("error_description")
        item: AuthorizationCodeResult | OAuthError = OAuthError(
            f"authorization refused: {text}" + (f" ({desc})" if desc else ""))
        page = f"Login failed: {text}. You can close this tab."
    else:
        item = AuthorizationCodeResult(code=code, state=one("state"), iss=one("iss"))
        page = "Logged in. You can close this tab and return to the terminal."
    try:
        send.send_nowait(item)
    except anyio.WouldBlock:
        page = "This login was already completed."
    return page


async def _reply(stream: anyio.abc.SocketStream, status: int, text: str) -> None:
    body = f"<!doctype html><title>mcp-hub</title><p>{html.escape(text)}</p>".encode()
    reason = "OK" if status == 200 else "Not Found"
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    await stream.send(head + body)
