"""A few HTTP requests on one kept-alive connection, with the standard library only.

``mcp-hub status``/``tools``/``call`` ask a running hub with three or four small
requests. Through httpx that cost more than the requests themselves: importing
httpx and httpcore (about a quarter of a second) and building a TLS context from
the CA bundle (about a tenth) even for ``http://127.0.0.1``. ``http.client`` does
the same work here in a few milliseconds, and builds a TLS context only for an
``https://`` hub (verified against the system's CAs, or ``SSL_CERT_FILE``).

Errors: a refused, reset or timed-out connection raises ``OSError`` (or
``http.client.HTTPException`` for a malformed answer); the caller words them.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["TRANSPORT_ERRORS", "Connection", "Reply"]

#: What a failed exchange raises (a refused or dropped connection, a garbled answer).
TRANSPORT_ERRORS = (OSError, http.client.HTTPException)


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, headers (names in lower case) and the whole body."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Connection:
    """One connection to ``base`` (``http://host:port`` or ``https://…``), kept alive.

    ``connect_timeout`` bounds the connect, ``read_timeout`` every read after it (a
    tool call may take long: it is the call's own budget).
    """

    def __init__(self, base: str, *, connect_timeout: float = 30.0,
                 read_timeout: float = 600.0, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base)
        self._prefix = parts.path.rstrip("/")
        self._read_timeout = read_timeout
        self._headers = dict(headers or {})
        host, port = parts.hostname or "127.0.0.1", parts.port
        if parts.scheme == "https":
            import ssl  # only an https hub needs a TLS context (and its CA bundle)

            self._conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=connect_timeout, context=ssl.create_default_context())
        else:
            self._conn = http.client.HTTPConnection(host, port, timeout=connect_timeout)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def request(self, method: str, path: str, *, json_body: Any = None,
                headers: Mapping[str, str] | None = None) -> Reply:
        """Send one request on the kept connection (reconnecting once if it was closed)."""
        sent = {**self._headers, **(headers or {})}
        body: bytes | None = None
        if json_body is not None:
            body = json.dumps(json_body, separators=(",", ":")).encode()
            sent["Content-Type"] = "application/json"
        if self._conn.sock is None:
            self._conn.connect()
            assert self._conn.sock is not None
            self._conn.sock.settimeout(self._read_timeout)
        self._conn.request(method, self._prefix + path, body=body, headers=sent)
        response = self._conn.getresponse()
        content = response.read()
        names = {k.lower(): v for k, v in response.getheaders()}
        return Reply(response.status, names, content)

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Reply:
        return self.request("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.request("DELETE", path, **kwargs)
