"""A 2025 handshake session beside a 2026-07-28 one, for 2025 clients that can be asked.

With ``protocol = "auto"`` or ``"2026"`` the hub speaks 2026-07-28 to an
upstream that offers it. Some servers speak both eras but ask their questions (sampling, elicitation,
roots) only the 2025 way, as server-initiated requests on a handshake session;
on a 2026-07-28 connection those tools cannot ask at all. A 2025 client talking
to such a server directly would be asked.

So the hub meets each client in its era toward the upstream as well: when a
client of the 2025 era that declares sampling, elicitation or roots calls a tool
of an upstream over Streamable HTTP that the hub reached in 2026-07-28, the
call goes on a second upstream session opened with the
``initialize`` handshake. That session is opened lazily, on the first such call
(nothing is spent for servers or clients that never need it), is shared by all
later ones, is kept alive with a ``ping`` every ``keepalive_interval``, and lives
as long as the main session. A server that refuses the
handshake is not asked again while the main session lives; its calls stay on the
2026-07-28 session. Questions on the second session reach the calling client
through the same relays as on a 2025 upstream (mcp_hub.upstream.relays).
Stdio upstreams have one pipe, hence one session: never a second one.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import anyio
from mcp.client.session import ClientSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.pipeline.context import CallContext

__all__ = ["Companion", "wants_companion"]

logger = logging.getLogger("mcp_hub.upstream")

#: Opens the transport and a session on it (the connection's own session options).
OpenSession = Callable[[AsyncExitStack], Awaitable[ClientSession]]


def wants_companion(call: CallContext | None) -> bool:
    """A call from a 2025-era client that can answer at least one kind of question."""
    if call is None or call.protocol_version is None:
        return False
    if call.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    return call.can_sample or call.can_elicit or call.can_list_roots


class Companion:
    """The lazily opened handshake session of one upstream connection (module doc)."""

    def __init__(self, server: str, open_session: OpenSession, timeout: float,
                 keepalive: float = 0.0) -> None:
        self.server = server
        self._open = open_session
        self._timeout = timeout
        #: Seconds between pings on the second session (0: none), so that an idle server
        #: session is neither expired by the server nor found dead by a call.
        self._keepalive = keepalive
        self._wanted = anyio.Event()
        self._settled = anyio.Event()
        self.session: ClientSession | None = None
        #: Why there is no second session (the server refused the handshake), once known.
        self.refused: str | None = None
        #: Times a second session was opened (for the status and the tests).
        self.opened = 0

    async def serve(self) -> None:
        """Wait for the first call that wants the session, open it, hold it until cancelled."""
        await self._wanted.wait()
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack)
                with anyio.fail_after(self._timeout):
                    await session.initialize()
                if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    raise RuntimeError("the handshake ended in 2026-07-28")
                self.session = session
                self.opened += 1
                self._settled.set()
                logger.info("upstream %s: handshake session opened beside the 2026-07-28 "
                            "one, for 2025 clients", self.server)
                await self._hold(session)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # any refusal: the calls stay on the main session
            cause: BaseException = exc
            while isinstance(cause, BaseExceptionGroup) and len(cause.exceptions) == 1:
                cause = cause.exceptions[0]
            self.refused = f"{type(cause).__name__}: {cause}"
            logger.info("upstream %s: no handshake session beside the 2026-07-28 one (%s)",
                        self.server, self.refused)
        finally:
            self.session = None
            self._settled.set()

    async def _hold(self, session: ClientSession) -> None:
        """Keep the session until cancelled; a failed ping ends it (calls go back to the
        main session)."""
        if self._keepalive <= 0:
            await anyio.sleep_forever()
        while True:
            await anyio.sleep(self._keepalive)
            with anyio.fail_after(self._timeout):
                await session.send_ping()

    async def get(self, budget: float) -> ClientSession | None:
        """The second session, opening it if needed (waiting up to ``budget`` s); None if
        the server refuses it or it is not open in time."""
        if self.refused is not None:
            return None
        self._wanted.set()
        with anyio.move_on_after(budget):
            await self._settled.wait()
        return self.session

