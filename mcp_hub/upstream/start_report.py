"""What the hub says while it waits for its upstreams' first connections.

A first start can take long with nothing to show for it: ``npx``/``uvx`` fetch a
package before the server answers, a server loads a model. So while any enabled
server has not finished its first attempt, the manager logs (logger
``mcp_hub.start``, level INFO; not ``mcp_hub.upstream``, whose every line is about
one server):

* at once: ``starting 3 upstream servers: time, git, everything``;
* every :data:`EVERY_SECONDS`: ``waiting for memory (8 s; connecting): <the last
  line it wrote on stderr>`` for each server still on its first attempt (the
  record carries that ``server``, as every line about one upstream does);
* when every first attempt is over: ``upstreams: 3 of 3 ready, 33 tools, after 0.4
  s``, naming the ones that are not ready with their state.

Later reconnects are not reported here: the connection logs those itself.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio

from mcp_hub.redact import redact
from mcp_hub.upstream.connection import ServerConnection
from mcp_hub.upstream.status import ServerState

__all__ = ["EVERY_SECONDS", "report_first_start"]

logger = logging.getLogger("mcp_hub.start")

#: How often the servers still starting are named.
EVERY_SECONDS = 5.0


def _waiting_line(conn: ServerConnection, seconds: float) -> str:
    probe = conn.probe
    tail = probe.stderr_tail[-1] if probe is not None and probe.stderr_tail else ""
    line = f"waiting for {conn.name} ({seconds:.0f} s; {conn.state})"
    return redact(f"{line}: {tail[:200]}" if tail else line)


def _summary(conns: Sequence[ServerConnection], seconds: float) -> str:
    ready = [c for c in conns if c.state is ServerState.READY]
    tools = sum(len(c.exposed) for c in ready)
    line = f"upstreams: {len(ready)} of {len(conns)} ready, {tools} tools, after {seconds:.1f} s"
    others = [f"{c.name} ({c.state})" for c in conns if c.state is not ServerState.READY]
    return line + (f"; not ready: {', '.join(others)} (mcp-hub status shows why)"
                   if others else "")


async def report_first_start(conns: Sequence[ServerConnection], every: float = EVERY_SECONDS) -> None:
    """Log the first start of ``conns`` (enabled servers) as the module docstring says."""
    if not conns:
        return
    started = anyio.current_time()
    logger.info("starting %d upstream server%s: %s", len(conns), "" if len(conns) == 1 else "s",
                ", ".join(c.name for c in conns))
    while True:
        pending = [c for c in conns if not c.first_done.is_set()]
        if not pending:
            break
        with anyio.move_on_after(every):
            await pending[0].first_done.wait()
            continue
        elapsed = anyio.current_time() - started
        for conn in pending:
            if not conn.first_done.is_set():
                logger.info("%s", _waiting_line(conn, elapsed), extra={"server": conn.name})
    logger.info("%s", _summary(conns, anyio.current_time() - started))
