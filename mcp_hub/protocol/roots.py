"""The roots the hub gives an upstream that asks ``roots/list`` outside any call.

Inside a call, an upstream's ``roots/list`` goes to the client that made the
call (:mod:`mcp_hub.upstream.connection`). Outside one — many servers ask once
at start-up, and again on ``notifications/roots/list_changed`` — the hub
answers itself, never with an error:

1. the roots of the clients connected now, where they have any (each distinct
   URI once, in the order the clients connected);
2. otherwise the configured file roots (``[builtins.file] roots``) as ``file://``
   URIs;
3. otherwise an empty list.

The hub asks each handshake-era client that declares the ``roots`` capability
for its roots when it finishes its handshake and whenever it sends
``notifications/roots/list_changed``, and forgets them when it disconnects.
Whenever that changes the answer above, every connected upstream gets
``notifications/roots/list_changed`` (the hub declares ``roots.listChanged``
to upstreams), so a server that cached the start-up answer asks again.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import types

__all__ = ["ClientRoots"]

logger = logging.getLogger(__name__)

#: How long one ``roots/list`` to a client may take, and how often it is tried.
FETCH_TIMEOUT = 3.0
FETCH_ATTEMPTS = 3


def _declares_roots(conn: Any) -> bool:
    caps = getattr(conn, "client_capabilities", None)
    return caps is not None and getattr(caps, "roots", None) is not None


def _file_root(path: str) -> types.Root:
    resolved = Path(path).expanduser().resolve()
    return types.Root(uri=resolved.as_uri(), name=resolved.name or str(resolved))  # type: ignore[arg-type]


class ClientRoots:
    """Roots of the connected clients, the answer built from them, and change announcements."""

    def __init__(
        self,
        connections: Callable[[], list[Any]],
        file_roots: Callable[[], list[str]],
        announce: Callable[[], Awaitable[None]],
    ) -> None:
        self._connections = connections
        self._file_roots = file_roots
        self._announce = announce
        self._known: weakref.WeakKeyDictionary[Any, list[types.Root]] = weakref.WeakKeyDictionary()
        self._last = self._uris(self.answer())

    @staticmethod
    def _uris(result: types.ListRootsResult) -> tuple[str, ...]:
        return tuple(str(r.uri) for r in result.roots)

    def answer(self) -> types.ListRootsResult:
        """The ``roots/list`` answer for an upstream asking outside any call."""
        roots: list[types.Root] = []
        seen: set[str] = set()
        for conn in self._connections():
            for root in self._known.get(conn, ()):
                if str(root.uri) not in seen:
                    seen.add(str(root.uri))
                    roots.append(root)
        if not roots:
            try:
                roots = [_file_root(p) for p in self._file_roots()]
            except (OSError, ValueError):
                logger.warning("the configured file roots cannot be given as roots", exc_info=True)
                roots = []
        return types.ListRootsResult(roots=roots)

    async def refresh(self, conn: Any) -> None:
        """Ask ``conn`` for its roots (bounded, a few tries) and announce a changed answer."""
        if not _declares_roots(conn):
            return
        result: types.ListRootsResult | None = None
        for _ in range(FETCH_ATTEMPTS):
            # A Streamable HTTP client may not have opened its standalone stream yet
            # when its handshake ends: a request sent then is lost, so try again.
            with anyio.move_on_after(FETCH_TIMEOUT):
                try:
                    result = await conn.send_request(types.ListRootsRequest())
                except Exception as exc:
                    logger.debug("roots/list to a client failed: %s", exc)
                    return
            if result is not None:
                break
        if result is None:
            logger.debug("a client declared roots but did not answer roots/list")
            return
        first = conn not in self._known
        self._known[conn] = list(result.roots)
        if first:
            stack = getattr(conn, "exit_stack", None)
            if stack is not None:
                stack.push_async_callback(self.forget, weakref.ref(conn))
        await self.changed()

    async def forget(self, ref: weakref.ref[Any]) -> None:
        """A client disconnected: its roots no longer count."""
        conn = ref()
        if conn is not None:
            self._known.pop(conn, None)
        await self.changed()

    async def changed(self) -> None:
        """Tell the upstreams when the answer differs from the last one they could see."""
        current = self._uris(self.answer())
        if current == self._last:
            return
        self._last = current
        try:
            await self._announce()
        except Exception:
            logger.warning("could not tell the upstreams that the roots changed", exc_info=True)
