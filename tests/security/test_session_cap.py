"""One session cap for the whole hub, that vanished clients cannot lock.

Clients that initialize and disappear without a DELETE must not keep a new
client out: at the cap the least recently used idle session is evicted (its id
answers 404). Sessions that never got past ``initialize`` expire on their own
within ``session_init_timeout``. Every live session, on any endpoint, is listed
in ``/status.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def open_session(http: httpx2.AsyncClient, url: str, *, initialized: bool = True) -> str:
    opened = await http.post(url, json=INIT, headers=HEADERS)
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    if initialized:
        done = await http.post(url, json=INITIALIZED, headers={**HEADERS, "Mcp-Session-Id": sid})
        assert done.status_code == 202, done.text
    return sid


async def http_sessions(http: httpx2.AsyncClient, base: str) -> dict[str, Any]:
    body: dict[str, Any] = (await http.get(f"{base}/status.json")).json()
    return body["http_sessions"]  # type: ignore[no-any-return]


def _config(tmp: Path, extra: str = "") -> Path:
    return write_config(tmp, echo_server_toml() + '\n[profiles.narrow]\ntoolsets = ["mcp-echo"]\n',
                        hub=f"[hub.http]\nmax_sessions = 20\n{extra}")


async def test_forty_vanished_clients_do_not_lock_out_a_new_one(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with http_hub(_config(tmp_path), tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            urls = [hub.mcp_url, f"{hub.base}/p/narrow/mcp"]
            sids = [await open_session(http, urls[i % 2]) for i in range(40)]  # never DELETEd
            status = await http_sessions(http, hub.base)
            assert status["count"] == 20 and status["max"] == 20
            assert status["evicted"] == 20
            # One cap for every endpoint: both kinds are in the same list.
            assert {s["endpoint"] for s in status["sessions"]} == {"/mcp", "/p/narrow/mcp"}
            assert {s["id"] for s in status["sessions"]} == {sid[:8] for sid in sids[20:]}
            # The evicted (least recently used) sessions answer 404: their clients re-initialize.
            gone = await http.post(urls[0], json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                                   headers={**HEADERS, "Mcp-Session-Id": sids[0]})
            assert gone.status_code == 404
            async with http_session(hub.mcp_url) as session:
                assert [t.name for t in (await session.list_tools()).tools]
            assert (await http_sessions(http, hub.base))["count"] <= 20


async def test_busy_sessions_are_never_evicted(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub="[hub.http]\nmax_sessions = 2\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            sids = [await open_session(http, hub.mcp_url) for _ in range(2)]
            async with anyio.create_task_group() as tg:
                opened = [anyio.Event(), anyio.Event()]

                async def listen(sid: str, ready: anyio.Event) -> None:
                    # An open GET stream is a request in flight: the session is busy.
                    get_headers = {**HEADERS, "Accept": "text/event-stream", "Mcp-Session-Id": sid}
                    async with http.stream("GET", hub.mcp_url, headers=get_headers) as stream:
                        assert stream.status_code == 200
                        ready.set()
                        await anyio.sleep_forever()

                for sid, ready in zip(sids, opened, strict=True):
                    tg.start_soon(listen, sid, ready)
                for ready in opened:
                    await ready.wait()
                refused = await http.post(hub.mcp_url, json=INIT, headers=HEADERS)
                assert refused.status_code == 503
                tg.cancel_scope.cancel()
            # The streams are gone: the sessions are idle now, and the LRU one makes room.
            while (await http.post(hub.mcp_url, json=INIT, headers=HEADERS)).status_code != 200:
                await anyio.sleep(0.05)


async def test_initialize_only_sessions_expire_quickly_and_show_in_status(tmp_path: Path) -> None:
    config = _config(tmp_path, "session_init_timeout = 1\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            half = await open_session(http, hub.mcp_url, initialized=False)
            full = await open_session(http, f"{hub.base}/p/narrow/mcp")
            states = {s["id"]: s["state"] for s in (await http_sessions(http, hub.base))["sessions"]}
            assert states == {half[:8]: "initializing", full[:8]: "active"}
            while half[:8] in {s["id"] for s in (await http_sessions(http, hub.base))["sessions"]}:
                await anyio.sleep(0.1)  # polling another process's state, bounded above
            left = [s["id"] for s in (await http_sessions(http, hub.base))["sessions"]]
            assert left == [full[:8]]
