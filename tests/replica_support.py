"""Hub replicas behind haproxy with a shared redis-server, for the replica tests.

Every replica test starts the same thing: a real redis-server, N hub replicas
of one config that share ``[hub.http] session_secret`` (from
``MCP_HUB_SESSION_SECRET``) and ``[state] url``, and deploy/haproxy/haproxy.cfg
in front of them (round-robin per request, no stickiness). The waits are those
of :mod:`tests.system_services` and :func:`tests.hubtest.http_hub`, each
bounded; when anything inside fails, each replica's stderr and haproxy's log
are printed, so the test report shows them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from itertools import cycle, islice
from pathlib import Path

import pytest

from tests.hubtest import HttpHub, http_hub, show_log
from tests.system_services import RedisServer, haproxy, redis_server

#: deploy/haproxy/haproxy.cfg names this many backends; fewer replicas fill them in turn.
HAPROXY_BACKENDS = 3


@dataclass
class Replicas:
    """The running set: the redis-server, the replicas in start order, haproxy's port."""

    redis: RedisServer
    hubs: list[HttpHub]
    port: int

    @property
    def url(self) -> str:
        """The MCP endpoint through haproxy."""
        return f"http://127.0.0.1:{self.port}/mcp"


def shared_state(redis_url: str, http: str = "") -> str:
    """``[hub.http]`` with the replicas' shared ``session_secret`` (after ``http``, more
    keys of that table), then ``[state] url``: the TOML that makes hubs replicas."""
    return ("[hub.http]\n" + http + 'session_secret = "${MCP_HUB_SESSION_SECRET}"\n\n'
            f'[state]\nurl = "{redis_url}"\n\n')


@asynccontextmanager
async def replicas(tmp: Path, monkeypatch: pytest.MonkeyPatch,
                   config: Callable[[str], Path], count: int) -> AsyncIterator[Replicas]:
    """redis-server, ``count`` replicas of ``config(redis_url)`` (each in its own
    ``tmp/replicaN``), haproxy in front of them; stopped in reverse order on exit."""
    monkeypatch.setenv("MCP_HUB_SESSION_SECRET", f"a-shared-secret-of-the-{count}-replicas")
    hubs: list[HttpHub] = []
    try:
        async with AsyncExitStack() as stack:
            redis = await stack.enter_async_context(redis_server(tmp))
            path = config(redis.url)
            for i in range(count):
                workdir = tmp / f"replica{i + 1}"
                workdir.mkdir()
                hubs.append(await stack.enter_async_context(http_hub(path, workdir)))
            backends = list(islice(cycle(h.port for h in hubs), HAPROXY_BACKENDS))
            port = await stack.enter_async_context(haproxy(backends, tmp))
            yield Replicas(redis, hubs, port)
    except BaseException:
        _show_logs(tmp)
        raise


def _show_logs(tmp: Path) -> None:
    """Print haproxy's log (pytest shows it on failure); each replica's log is shown by
    :func:`tests.hubtest.http_hub` as the failure leaves it."""
    log = tmp / "haproxy.log"
    if log.exists():
        show_log("haproxy", log, 2000)
