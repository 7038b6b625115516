"""Sealed sessions keep their guards on every replica: caller filter, lifetimes, DELETE, owner.

Real hub processes (one, or two replicas sharing a real redis-server) with real
stdio upstreams; every request picks its replica, as a round-robin load
balancer would. Each test is one attack on a session that moves between
replicas or outlives its use:

* a session rebuilt on another replica is filtered by its caller from its first
  byte: a narrow identity's GET stream there gets no ``list_changed`` for tools
  it cannot see;
* a DELETE ends a sealed id for good (one process without a store, replicas
  with Redis, where the closed marker lives as long as the id could);
* a sealed id expires: absolute (``session_max_lifetime``) and idle
  (``session_idle_timeout``) lifetimes, on the replica that served it and on
  one that never did;
* a request refused for another identity's session (404) changes nothing of
  that session's stored events: its owner still resumes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import redis.asyncio as aioredis
from anyio.abc import ObjectReceiveStream

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import (
    HttpHub,
    echo_server_toml,
    http_hub,
    rpc_messages,
    send_sse_messages,
    sse_events,
)
from tests.system_services import redis_server

pytestmark = pytest.mark.anyio

SECRET = "a-secret-shared-by-the-replicas"
ADMIN = "sealed-guard-admin-token-aaaaaaaaaaaaaaaa"
BOB = "sealed-guard-bob-token-bbbbbbbbbbbbbbbbbbbb"
CAROL = "sealed-guard-carol-token-cccccccccccccccccc"
ACCEPT = "application/json, text/event-stream"
VERSION = "2025-11-25"


def _config(tmp: Path, *, http: str = "", state: str = "", body: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        "[hub]\nstartup_timeout = 20\n\n[tool_search]\nmode = \"off\"\n\n"
        "[hub.http]\nauth_tokens = ["
        f'{{ name = "admin", token = "{ADMIN}" }}, {{ name = "bob", token = "{BOB}" }}, '
        f'{{ name = "carol", token = "{CAROL}" }}]\n{http}\n{state}\n{body}'
        f"[servers.work]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n"
        f"env = {{ PLAIN_MARKER = {toml_str(str(tmp / 'marker'))} }}\n\n"
        + echo_server_toml())
    return path


def _headers(token: str, sid: str | None = None) -> dict[str, str]:
    found = {"Accept": ACCEPT, "Authorization": f"Bearer {token}", "mcp-protocol-version": VERSION}
    if sid is not None:
        found["mcp-session-id"] = sid
    return found


async def _open(client: httpx2.AsyncClient, url: str, token: str) -> str:
    r = await client.post(url, headers=_headers(token), json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "guard", "version": "1"}}})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = await client.post(url, headers=_headers(token, sid),
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202, r.text
    return sid


async def _request(client: httpx2.AsyncClient, url: str, token: str, sid: str, method: str,
                   params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    r = await client.post(url, headers=_headers(token, sid), json={
        "jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    assert r.status_code == 200, r.text
    answer = next(m for m in rpc_messages(r) if m.get("id") == rid)
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


async def _ping(client: httpx2.AsyncClient, url: str, token: str, sid: str) -> int:
    r = await client.post(url, headers=_headers(token, sid),
                          json={"jsonrpc": "2.0", "id": 99, "method": "ping"})
    return r.status_code


@asynccontextmanager
async def _get_stream(client: httpx2.AsyncClient, url: str, token: str, sid: str
                      ) -> AsyncIterator[ObjectReceiveStream[dict[str, Any]]]:
    """The messages of session ``sid``'s GET stream on replica ``url``."""
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)
    async with client.stream("GET", url, headers=_headers(token, sid)) as response, \
            anyio.create_task_group() as tg:
        assert response.status_code == 200
        tg.start_soon(send_sse_messages, response, send)
        yield receive
        tg.cancel_scope.cancel()


async def _until(stream: ObjectReceiveStream[dict[str, Any]], method: str) -> list[str]:
    """The methods ``stream`` carried up to and including the first ``method``."""
    seen: list[str] = []
    with anyio.fail_after(20):
        async for message in stream:
            seen.append(str(message.get("method")))
            if seen[-1] == method:
                return seen
    raise AssertionError(f"the stream ended before {method}: {seen}")


@asynccontextmanager
async def _replicas(tmp: Path, *, http: str = "", body: str = ""
                    ) -> AsyncIterator[tuple[str, HttpHub, HttpHub]]:
    """redis-server and two hub replicas sharing it (and a session secret)."""
    async with AsyncExitStack() as stack:
        redis = await stack.enter_async_context(redis_server(tmp))
        config = _config(tmp, http=f'session_secret = "{SECRET}"\n{http}',
                         state=f'[state]\nurl = "{redis.url}"\n', body=body)
        hubs = []
        for name in ("a", "b"):
            (tmp / name).mkdir()
            hubs.append(await stack.enter_async_context(http_hub(config, tmp / name)))
        yield redis.url, hubs[0], hubs[1]


# -- the caller's filter on a rebuilt session -------------------------------------------

_NARROW = ('[profiles.narrow]\ntoolsets = ["mcp-watched"]\n\n'
           '[[access]]\nmatch = "token:bob"\nprofile = "narrow"\n\n'
           '[[access]]\nmatch = "token:admin"\n\n'
           f"[servers.watched]\ncommand = {toml_str(PY)}\n"
           f"args = [{toml_str(str(FIXTURES / 'watched_server.py'))}]\n\n")


async def test_a_rebuilt_session_gets_no_list_changed_for_tools_its_caller_cannot_see(
        tmp_path: Path) -> None:
    async with _replicas(tmp_path, body=_NARROW) as (_url, a, b), \
            httpx2.AsyncClient(timeout=httpx2.Timeout(20, read=60)) as client:
        with anyio.fail_after(120):
            # Bob (profile narrow: the watched server only) opens on A and subscribes there.
            bob = await _open(client, a.mcp_url, BOB)
            uris = [r["uri"] for r in (await _request(
                client, a.mcp_url, BOB, bob, "resources/list", {}))["resources"]]
            uri = next(u for u in uris if u.endswith("watched://a"))
            await _request(client, a.mcp_url, BOB, bob, "resources/subscribe", {"uri": uri})
            admin = await _open(client, b.mcp_url, ADMIN)
            tools = [t["name"] for t in (await _request(
                client, b.mcp_url, ADMIN, admin, "tools/list", {}))["tools"]]
            touch = next(t for t in tools if t.endswith("touch"))
            # Bob's first request on B is his GET stream: B rebuilds his session from it.
            async with _get_stream(client, b.mcp_url, BOB, bob) as bob_stream, \
                    _get_stream(client, b.mcp_url, ADMIN, admin) as admin_stream:
                # A tool only the admin sees appears on B's echo upstream.
                await _request(client, b.mcp_url, ADMIN, admin, "tools/call", {
                    "name": "echo_add_tool", "arguments": {"name": "hidden"}}, rid=2)
                await _until(admin_stream, "notifications/tools/list_changed")
                # Then a resource Bob subscribed to changes: its update closes his stream's
                # sequence; no tools/list_changed may come before it.
                await _request(client, b.mcp_url, ADMIN, admin, "tools/call", {
                    "name": touch, "arguments": {"uri": "watched://a"}}, rid=3)
                seen = await _until(bob_stream, "notifications/resources/updated")
                assert "notifications/tools/list_changed" not in seen, seen
            assert "echo_hidden" not in [t["name"] for t in (await _request(
                client, b.mcp_url, BOB, bob, "tools/list", {}, rid=4))["tools"]]


# -- DELETE and lifetimes ---------------------------------------------------------------


async def test_delete_ends_a_sealed_session_in_one_process_without_a_store(
        tmp_path: Path) -> None:
    config = _config(tmp_path, http=f'session_secret = "{SECRET}"\n')
    async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=20) as client:
        with anyio.fail_after(60):
            sid = await _open(client, hub.mcp_url, BOB)
            assert sid.startswith("s1.")
            assert await _ping(client, hub.mcp_url, BOB, sid) == 200
            r = await client.delete(hub.mcp_url, headers=_headers(BOB, sid))
            assert r.status_code == 200, r.text
            # The id is not rebuilt from its seal: it was ended.
            assert await _ping(client, hub.mcp_url, BOB, sid) == 404
            r = await client.get(hub.mcp_url, headers=_headers(BOB, sid))
            assert r.status_code == 404


def _closed_key(sid: str) -> str:
    return f"mcp-hub:session:{hashlib.sha256(sid.encode()).hexdigest()[:32]}:closed"


async def test_delete_on_one_replica_holds_on_another_for_the_ids_whole_lifetime(
        tmp_path: Path) -> None:
    lifetime = 3 * 24 * 3600
    async with _replicas(tmp_path, http=f"session_max_lifetime = {lifetime}\n") as (url, a, b), \
            httpx2.AsyncClient(timeout=20) as client:
        with anyio.fail_after(90):
            sid = await _open(client, a.mcp_url, BOB)
            r = await client.delete(a.mcp_url, headers=_headers(BOB, sid))
            assert r.status_code == 200, r.text
            # B never held the session: it refuses to rebuild the ended id.
            assert await _ping(client, b.mcp_url, BOB, sid) == 404
            assert await _ping(client, a.mcp_url, BOB, sid) == 404
            # The closed marker lives as long as the id could be valid (three days
            # here), not a fixed day after which any replica would rebuild it.
            store = aioredis.from_url(url)
            try:
                ttl = await store.ttl(_closed_key(sid))
            finally:
                await store.aclose()
            assert 2 * 24 * 3600 < ttl <= lifetime, ttl


async def test_a_sealed_id_past_its_lifetime_is_refused_on_every_replica(
        tmp_path: Path) -> None:
    async with _replicas(tmp_path, http="session_max_lifetime = 4\n") as (_url, a, b), \
            httpx2.AsyncClient(timeout=20) as client:
        with anyio.fail_after(90):
            sid = await _open(client, a.mcp_url, BOB)
            other = await _open(client, a.mcp_url, BOB)
            assert await _ping(client, b.mcp_url, BOB, other) == 200  # B rebuilt it
            # Used without a pause, the session still ends at its absolute lifetime:
            # on A (its live copy), on B (a rebuilt copy), and never rebuilt again.
            with anyio.fail_after(30):
                while await _ping(client, a.mcp_url, BOB, sid) == 200:
                    await anyio.sleep(0.2)
            assert await _ping(client, a.mcp_url, BOB, sid) == 404
            assert await _ping(client, b.mcp_url, BOB, sid) == 404
            with anyio.fail_after(30):
                while await _ping(client, b.mcp_url, BOB, other) == 200:
                    await anyio.sleep(0.2)
            assert await _ping(client, a.mcp_url, BOB, other) == 404


async def test_an_idle_sealed_id_is_not_rebuilt_in_one_process(tmp_path: Path) -> None:
    config = _config(tmp_path, http=f'session_secret = "{SECRET}"\nsession_idle_timeout = 2\n')
    async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=20) as client:
        with anyio.fail_after(60):
            sid = await _open(client, hub.mcp_url, BOB)
            assert await _ping(client, hub.mcp_url, BOB, sid) == 200
            # Unused, the session idles out; its sealed id does not bring it back.
            with anyio.fail_after(30):
                while True:
                    status = (await client.get(f"{hub.base}/status.json",
                                               headers=_headers(ADMIN))).json()
                    if not status["http_sessions"]["sessions"]:
                        break
                    await anyio.sleep(0.2)
            assert await _ping(client, hub.mcp_url, BOB, sid) == 404


def _seen_key(sid: str) -> str:
    return f"mcp-hub:session:{hashlib.sha256(sid.encode()).hexdigest()[:32]}:seen"


async def test_an_idle_sealed_id_is_not_rebuilt_on_another_replica(tmp_path: Path) -> None:
    async with _replicas(tmp_path, http="session_idle_timeout = 4\n") as (url, a, b), \
            httpx2.AsyncClient(timeout=20) as client:
        with anyio.fail_after(90):
            sid = await _open(client, a.mcp_url, BOB)
            assert await _ping(client, a.mcp_url, BOB, sid) == 200
            # Redis records the session's last use for every replica; unused, it lapses.
            store = aioredis.from_url(url)
            try:
                with anyio.fail_after(10):
                    while not await store.exists(_seen_key(sid)):
                        await anyio.sleep(0.05)
                with anyio.fail_after(30):
                    while await store.exists(_seen_key(sid)):
                        await anyio.sleep(0.2)
            finally:
                await store.aclose()
            # B never held the session; the id is too old and unused: not rebuilt.
            assert await _ping(client, b.mcp_url, BOB, sid) == 404
            with anyio.fail_after(30):
                while (await client.get(f"{a.base}/status.json", headers=_headers(ADMIN))
                       ).json()["http_sessions"]["sessions"]:
                    await anyio.sleep(0.2)
            assert await _ping(client, a.mcp_url, BOB, sid) == 404


# -- a refused request touches nothing --------------------------------------------------


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
async def test_a_refused_resume_leaves_the_owners_events_intact(tmp_path: Path,
                                                                 sealed: bool) -> None:
    http = f'session_secret = "{SECRET}"\n' if sealed else ""
    async with http_hub(_config(tmp_path, http=http), tmp_path) as hub, \
            httpx2.AsyncClient(timeout=httpx2.Timeout(30)) as client:
        with anyio.fail_after(90):
            carol = await _open(client, hub.mcp_url, CAROL)
            last: str | None = None
            call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "work_sleep", "arguments": {"seconds": 1.5},
                "_meta": {"progressToken": "p7"}}}
            async with client.stream("POST", hub.mcp_url, headers=_headers(CAROL, carol),
                                     json=call) as r:
                async for event_id, _ in sse_events(r):
                    last = event_id  # the priming event: Carol's cursor
                    break
            assert last is not None
            # Bob presents Carol's session id and cursor: refused like an unknown session.
            stolen = {**_headers(BOB, carol), "Last-Event-ID": last}
            r = await client.get(hub.mcp_url, headers=stolen)
            assert r.status_code == 404, r.text
            # ... and a POST of a request with the same id as her call's stream.
            r = await client.post(hub.mcp_url, headers=stolen, json={
                **call, "params": {"name": "work_sleep", "arguments": {"seconds": 0}}})
            assert r.status_code == 404, r.text
            # Carol's own resume still gets her answer.
            answer: dict[str, Any] | None = None
            async with client.stream("GET", hub.mcp_url, headers={
                    **_headers(CAROL, carol), "Last-Event-ID": last}) as r:
                assert r.status_code == 200
                with anyio.fail_after(20):
                    async for _, data in sse_events(r):
                        message = json.loads(data) if data else {}
                        if message.get("id") == 7:
                            answer = message
                            break
            assert answer is not None
            assert answer["result"]["content"][0]["text"] == "slept"
