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

from tests.hubtest import HttpHub, http_hub
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
        _show_logs(hubs, tmp)
        raise


def _show_logs(hubs: list[HttpHub], tmp: Path) -> None:
    """Print each replica's stderr and haproxy's log (pytest shows them on failure)."""
    for i, hub in enumerate(hubs):
        print(f"--- replica {i + 1} (port {hub.port}) stderr:\n{hub.stderr()[-4000:]}")
    log = tmp / "haproxy.log"
    if log.exists():
        print(f"--- haproxy log:\n{log.read_text(errors='replace')[-2000:]}")
