"""Three hub replicas behind a real haproxy (round-robin, no stickiness) and a real Redis.

One SDK ClientSession over Streamable HTTP goes through the load balancer, so
its requests land on every replica in turn. Sessions move because their state
is sealed into the session id ([hub.http] session_secret); answers to sampling,
cancels and GET-stream notifications cross replicas over Redis pub/sub.
redis-server and haproxy are Debian's, installed by .ci/setup-system.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import types
from mcp.shared.exceptions import MCPError

from tests.fixtures_upstream import FIXTURES, toml_str
from tests.hubtest import PY, ROOT, HttpHub, http_session
from tests.replica_support import replicas, shared_state
from tests.system_services import RedisServer

pytestmark = pytest.mark.anyio

TOKEN = "replica-test-token-aaaaaaaaaaaaaaaaaaaaaaaa"
OTHER_TOKEN = "replica-test-token-bbbbbbbbbbbbbbbbbbbbbbbb"
RATE = 300
CALLS = int(os.environ.get("REPLICA_CALLS", "200"))


def _config(tmp: Path, redis_url: str, extra: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        "[hub]\nstartup_timeout = 20\n\n" + extra +
        shared_state(redis_url, f'auth_tokens = ["{TOKEN}", "{OTHER_TOKEN}"]\n'
                                f"rate_limit_per_minute = {RATE}\n") +
        f"[servers.echo]\ncommand = {toml_str(PY)}\n"
        'args = ["-m", "tests.fixtures.echo_server"]\n'
        f"cwd = {toml_str(str(ROOT))}\n\n"
        f"[servers.work]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n"
        f"env = {{ PLAIN_MARKER = {toml_str(str(tmp / 'marker'))} }}\n"
        f"\n[servers.watched]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'watched_server.py'))}]\n")
    return path


@asynccontextmanager
async def _cluster(tmp: Path, monkeypatch: pytest.MonkeyPatch, extra: str = ""
                   ) -> AsyncIterator[tuple[RedisServer, list[HttpHub], str]]:
    """redis-server, three hub replicas sharing it, haproxy in front; ``extra`` goes into
    the config after ``[hub]`` (more settings, e.g. a ``[pins]`` table)."""
    async with replicas(tmp, monkeypatch, lambda url: _config(tmp, url, extra), 3) as running:
        yield running.redis, running.hubs, running.url


def _text(result: types.CallToolResult) -> str:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def _status(client: httpx2.AsyncClient, hub: HttpHub) -> dict[str, Any]:
    r = await client.get(f"{hub.base}/status.json", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    body: dict[str, Any] = r.json()
    return body


async def _wait_state(client: httpx2.AsyncClient, hubs: list[HttpHub], available: bool) -> None:
    with anyio.fail_after(20):
        for hub in hubs:
            while True:
                body = (await client.get(f"{hub.base}/readyz")).json()
                if body["state"]["available"] is available:
                    assert body["degraded"] is (not available)
                    break
                await anyio.sleep(0.1)


class _Client:
    """What the client saw: list_changed notifications and sampling requests."""

    def __init__(self) -> None:
        self.changed = anyio.Event()
        self.samples = 0

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.changed.set()

    async def on_sample(self, ctx: Any, params: types.CreateMessageRequestParams
                        ) -> types.CreateMessageResult:
        self.samples += 1
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=content.text.upper()), model="m1")


def _names(tools: types.ListToolsResult) -> dict[str, str]:
    """Tool name by its upstream's own name (the hub may prefix it)."""
    found: dict[str, str] = {}
    for tool in tools.tools:
        for raw in ("echo", "add_tool", "slow", "sample", "hang", "hub_status"):
            if tool.name == raw or tool.name.endswith("_" + raw):
                found.setdefault(raw, tool.name)
    return found


async def _marker_has(path: Path, text: str) -> None:
    with anyio.fail_after(15):
        while not (path.exists() and text in path.read_text()):
            await anyio.sleep(0.05)


async def test_one_session_across_three_replicas(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    client = _Client()
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with _cluster(tmp_path, monkeypatch) as (redis, hubs, url), \
            httpx2.AsyncClient(timeout=10) as probe:
        with anyio.fail_after(180):
            async with http_session(url, headers={"Authorization": f"Bearer {TOKEN}"},
                                    message_handler=client.on_message,
                                    sampling_callback=client.on_sample) as session:
                names = _names(await session.list_tools())
                errors = 0
                for i in range(CALLS):
                    result = await session.call_tool(names["echo"], {"text": f"n{i}"})
                    errors += result.is_error or _text(result) != f"n{i}"
                assert errors == 0
                # Every replica served part of the one session.
                served = [len((await _status(probe, h))["recent_calls"]) for h in hubs]
                assert all(served), served
                requests = [sum(x["requests"] for x in (await _status(probe, h))[
                    "http_sessions"]["sessions"]) for h in hubs]
                print(f"{CALLS} calls, {errors} errors; requests of the session per replica: "
                      f"{requests}")

                # An upstream change on whichever replica runs add_tool reaches the
                # session's GET stream, wherever that stream is held.
                await session.call_tool(names["add_tool"], {"name": "dyn"})
                with anyio.fail_after(15):
                    await client.changed.wait()

                done = await session.call_tool(names["slow"], {"seconds": 0.3, "steps": 3},
                                               progress_callback=on_progress)
                assert _text(done) == "slept 0.3"
                assert progress == [1, 2, 3]

                for _ in range(3):  # the answer goes to whichever replica; the call's gets it
                    assert _text(await session.call_tool(
                        names["sample"], {"prompt": "abc"})) == "sampled[m1]: ABC"
                assert client.samples == 3
                # Round-robin sent answers to other replicas than the calls': the bus carried them.
                bus = [(await _status(probe, h))["replicas"]["bus"] for h in hubs]
                assert sum(b["published"] for b in bus) >= 3, bus
                assert sum(b["delivered"] for b in bus) >= 3, bus
                print(f"bus per replica: {bus}")

                with pytest.raises(MCPError):
                    await session.call_tool(names["hang"], {}, read_timeout_seconds=1.0)
                await _marker_has(tmp_path / "marker", "cancelled")

                # kill -9 one replica: the session goes on through the other two.
                os.kill(hubs[0].proc.pid, signal.SIGKILL)
                hubs[0].proc.wait()
                for i in range(30):
                    assert _text(await session.call_tool(
                        names["echo"], {"text": f"after{i}"})) == f"after{i}"
                assert names["echo"] in {t.name for t in (await session.list_tools()).tools}
                live = hubs[1:]
                served = [(await _status(probe, h))["replicas"]["recovered"] for h in live]
                assert all(served), served

                # Redis stops: calls that do not need it go on; /readyz and hub_status say so.
                await redis.stop()
                await _wait_state(probe, live, available=False)
                for i in range(20):
                    assert _text(await session.call_tool(
                        names["echo"], {"text": f"noredis{i}"})) == f"noredis{i}"
                status = await session.call_tool(names["hub_status"], {})
                assert status.structured_content is not None
                assert status.structured_content["state"]["available"] is False

                # Redis returns: the hub recovers, calls that need it work again.
                await redis.start()
                await _wait_state(probe, live, available=True)  # the bus subscribed again
                assert _text(await session.call_tool(
                    names["sample"], {"prompt": "back"})) == "sampled[m1]: BACK"


async def test_rate_limit_holds_across_replicas(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    async with _cluster(tmp_path, monkeypatch) as (_redis, _hubs, url), \
            httpx2.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {OTHER_TOKEN}"}
                               ) as client:
        codes: list[int] = []

        async def hit(n: int) -> None:
            for _ in range(n):
                codes.append((await client.get(url)).status_code)

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for _ in range(8):
                    tg.start_soon(hit, (2 * RATE) // 8)
        admitted = sum(1 for c in codes if c != 429)
        print(f"rate limit {RATE}/min per token over 3 replicas: {admitted} of {len(codes)} "
              f"admitted ({100 * (admitted - RATE) / RATE:+.1f} %)")
        assert abs(admitted - RATE) <= RATE // 10, (admitted, RATE)
