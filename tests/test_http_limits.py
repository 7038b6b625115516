"""HTTP limits of a real hub process: body size, session cap, idle expiry, per-token rate
limit, and an auth failure logged without the token."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.hubtest import echo_server_toml, http_hub, write_config

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


async def open_session(http: httpx2.AsyncClient, url: str, headers: dict[str, str] | None = None
                       ) -> httpx2.Response:
    return await http.post(url, json=INIT, headers={**HEADERS, **(headers or {})})


async def sessions(http: httpx2.AsyncClient, base: str, headers: dict[str, str] | None = None
                   ) -> int:
    body: dict[str, Any] = (await http.get(f"{base}/status.json", headers=headers)).json()
    return int(body["hub"]["sessions"])


async def test_a_body_over_the_limit_is_refused_with_413(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub="[hub.http]\nmax_body_bytes = 2048\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            opened = await open_session(http, hub.mcp_url)
            headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            big = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                   "params": {"name": "echo_echo", "arguments": {"text": "x" * 4096}}}
            response = await http.post(hub.mcp_url, content=json.dumps(big), headers=headers)
            assert response.status_code == 413
            small = {**big, "params": {"name": "echo_echo", "arguments": {"text": "x" * 100}}}
            response = await http.post(hub.mcp_url, content=json.dumps(small), headers=headers)
            assert response.status_code == 200
            assert hub.proc.poll() is None


async def test_at_the_cap_the_least_recently_used_idle_session_makes_room(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub="[hub.http]\nmax_sessions = 2\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            first = await open_session(http, hub.mcp_url)
            second = await open_session(http, hub.mcp_url)
            assert first.status_code == second.status_code == 200
            third = await open_session(http, hub.mcp_url)
            assert third.status_code == 200, third.text
            ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            evicted = await http.post(hub.mcp_url, json=ping, headers={
                **HEADERS, "Mcp-Session-Id": first.headers["mcp-session-id"]})
            assert evicted.status_code == 404
            closed = await http.delete(hub.mcp_url, headers={
                **HEADERS, "Mcp-Session-Id": second.headers["mcp-session-id"]})
            assert closed.status_code in (200, 204)
            again = await open_session(http, hub.mcp_url)
            assert again.status_code == 200


async def test_an_idle_session_expires_and_is_forgotten(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(),
                          hub="[hub.http]\nsession_idle_timeout = 1\n")
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            opened = await open_session(http, hub.mcp_url)
            headers = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
            ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            assert (await http.post(hub.mcp_url, json=ping, headers=headers)).status_code == 200
            assert await sessions(http, hub.base) == 1
            # Bounded by fail_after: a session that never expires fails the test there.
            while await sessions(http, hub.base) != 0:  # polling another process's state
                await anyio.sleep(0.1)
            expired = await http.post(hub.mcp_url, json=ping, headers=headers)
            assert expired.status_code == 404


async def test_the_rate_limit_is_per_token_and_answers_429(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub=(
        '[hub.http]\nauth_tokens = ["token-aaaaaaaaaaaaaaaa", "token-bbbbbbbbbbbbbbbb"]\n'
        "rate_limit_per_minute = 5\n"))
    a = {"Authorization": "Bearer token-aaaaaaaaaaaaaaaa"}
    b = {"Authorization": "Bearer token-bbbbbbbbbbbbbbbb"}
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            codes = [(await http.get(f"{hub.base}/status.json", headers=a)).status_code
                     for _ in range(6)]
            assert codes == [200] * 5 + [429]
            limited = await http.get(f"{hub.base}/status.json", headers=a)
            assert limited.status_code == 429 and limited.headers["retry-after"] == "60"
            assert limited.json()["error"] == "rate_limited"
            assert (await http.get(f"{hub.base}/status.json", headers=b)).status_code == 200
            assert (await http.get(f"{hub.base}/healthz")).status_code == 200  # probes stay open


async def test_an_auth_failure_is_logged_without_the_token(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml(), hub=(
        '[hub.http]\nauth_tokens = ["the-real-token-1234"]\n'))
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=10) as http:
            wrong = "a-wrong-guess-98765"
            response = await open_session(http, hub.mcp_url, {"Authorization": f"Bearer {wrong}"})
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == 'Bearer realm="mcp-hub"'
            assert wrong not in response.text
            cookie = await http.get(f"{hub.base}/status.json",
                                    headers={"Cookie": f"mcp_hub_token={wrong}-cookie"})
            assert cookie.status_code == 401
            ok = await open_session(http, hub.mcp_url,
                                    {"Authorization": "Bearer the-real-token-1234"})
            assert ok.status_code == 200
            log = hub.stderr()
            assert "authentication failed for POST /mcp from 127.0.0.1" in log
            assert "authentication failed for GET /status.json" in log
            assert wrong not in log
            assert "the-real-token-1234" not in log
