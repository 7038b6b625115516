"""Smaller findings, each reproduced against a real hub: JSON nesting, ids, Host/Origin
matching, duplicate credentials, and what the status cookie opens.

Also kept as regression tests: auth on every route, path tricks under ``/p/``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from mcp_hub.downstream.http.host_rules import HostRules, matches
from tests.hubtest import PY, ROOT, HttpHub, hub_env, write_config
from tests.test_stdio_edges import _RawHub

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25", **AUTH}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpHub]:
    """One hub for the module (these tests only read): started and stopped synchronously."""
    tmp = tmp_path_factory.mktemp("edges")
    config = write_config(tmp, '[profiles.narrow]\ntoolsets = ["hub"]\n',
                          hub=f'[hub.http]\nauth_tokens = ["{TOKEN}"]\n')
    port_file, stderr_path = tmp / "port", tmp / "stderr.log"
    with stderr_path.open("wb") as err:
        proc = subprocess.Popen(
            [PY, "-m", "mcp_hub", "serve", "--transport", "http", "--port", "0",
             "--config", str(config), "--port-file", str(port_file)],
            cwd=str(ROOT), env=hub_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.05)
        running = HttpHub(proc, int(port_file.read_text()), stderr_path)
        while True:
            assert time.monotonic() < deadline, stderr_path.read_text()
            try:
                if httpx2.get(f"{running.base}/readyz").status_code == 200:
                    break
            except httpx2.TransportError:
                time.sleep(0.05)
        yield running
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_deeply_nested_json_is_a_parse_error_not_a_500(hub: HttpHub) -> None:
    deep = '{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    async with httpx2.AsyncClient(timeout=30) as http:
        r = await http.post(hub.mcp_url, content=deep, headers=MCP_HEADERS)
        assert r.status_code == 400
        assert r.json()["error"]["code"] == -32700
        assert (await http.get(f"{hub.base}/healthz")).status_code == 200
    assert "Traceback" not in hub.stderr()


@pytest.mark.parametrize("rid", ["1e400", "1.5", "null", "true", "{}"])
async def test_a_non_integer_id_is_an_invalid_request_not_a_notification(hub: HttpHub, rid: str) -> None:
    body = '{"jsonrpc": "2.0", "id": ' + rid + ', "method": "ping"}'
    async with httpx2.AsyncClient(timeout=30) as http:
        r = await http.post(hub.mcp_url, content=body, headers=MCP_HEADERS)
    assert r.status_code == 400, r.text
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": "Invalid Request: id must be a string or an integer"}}


def test_a_non_integer_id_over_stdio_is_an_invalid_request(tmp_path: Path) -> None:
    hub = _RawHub(write_config(tmp_path, ""))
    try:
        hub.initialize()
        for rid in ("1e400", "1.5"):
            hub.send('{"jsonrpc": "2.0", "id": ' + rid + ', "method": "ping"}')
            answer = hub.recv(15)
            assert answer is not None and answer["id"] is None
            assert answer["error"]["code"] == -32600
        hub.send('{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + "[" * 50_000 + "]" * 50_000 + "}}")
        deep = hub.recv(15)
        assert deep is not None and "error" in deep
        assert hub.alive_after_ping()
    finally:
        hub.close()


def test_wildcard_ports_match_exactly() -> None:
    assert matches("http://127.0.0.1:8765", ["http://127.0.0.1:*"])
    assert matches("LOCALHOST:80", ["localhost:*"])
    for bad in ("http://127.0.0.1:8765.evil.com", "http://127.0.0.1:", "http://127.0.0.1:80@evil.com",
                "http://127.0.0.1:١٢٣", "http://127.0.0.1:123456"):
        assert not matches(bad, ["http://127.0.0.1:*"]), bad
    rules = HostRules.for_bind("0.0.0.0", ["hub.example.com"], [])
    assert rules.origin_allowed("https://hub.example.com", "hub.example.com")
    assert not rules.origin_allowed("https://hub.example.com.evil.com", "hub.example.com")
    assert not rules.origin_allowed("https://evil.com", "evil.com")  # Host not allowed itself


async def test_host_and_origin_are_matched_exactly(hub: HttpHub) -> None:
    port = hub.port
    async with httpx2.AsyncClient(timeout=10) as http:
        evil_origin = await http.post(hub.mcp_url, json=INIT, headers={
            **MCP_HEADERS, "Origin": f"http://127.0.0.1:{port}.evil.com"})
        assert evil_origin.status_code == 403
        evil_host = await http.get(f"{hub.base}/status.json", headers={
            **AUTH, "Host": f"127.0.0.1:{port}.evil.com"})
        assert evil_host.status_code == 421
        # The guard and the SDK transport agree: what the guard admits, the SDK serves.
        for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            ok = await http.post(hub.mcp_url, json=INIT, headers={**MCP_HEADERS, "Origin": origin})
            assert ok.status_code == 200, (origin, ok.text)
        same = await http.post(hub.mcp_url, json=INIT, headers={
            **MCP_HEADERS, "Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"})
        assert same.status_code == 200


async def test_two_authorization_headers_are_refused(hub: HttpHub) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        for second in (f"Bearer {TOKEN}", "Bearer wrong-token-0123456789"):
            headers = [("Authorization", "Bearer wrong-token-0123456789"), ("Authorization", second)]
            r = await http.get(f"{hub.base}/status.json", headers=headers)
            assert r.status_code == 400, r.text
        assert (await http.get(f"{hub.base}/status.json", headers=AUTH)).status_code == 200


async def test_the_status_cookie_opens_only_the_status_page(hub: HttpHub) -> None:
    async with httpx2.AsyncClient(timeout=10, follow_redirects=False) as http:
        traded = await http.get(f"{hub.base}/?token={TOKEN}")
        assert traded.status_code == 303
        cookie = traded.headers["set-cookie"].split(";")[0]
        headers = {"Cookie": cookie}
        assert (await http.get(f"{hub.base}/", headers=headers)).status_code == 200
        assert (await http.get(f"{hub.base}/status.json", headers=headers)).status_code == 200
        assert (await http.get(f"{hub.base}/metrics", headers=headers)).status_code == 401
        assert (await http.post(hub.mcp_url, json=INIT, headers={
            **{k: v for k, v in MCP_HEADERS.items() if k != "Authorization"}, **headers})).status_code == 401


async def test_every_route_needs_the_token_and_path_tricks_do_not_bypass_it(hub: HttpHub) -> None:
    paths = ["/", "/status.json", "/metrics", "/mcp", "/sse", "/p/narrow/mcp", "/p/narrow/sse",
             "/p/narrow/../../status.json", "/p/%2e%2e/status.json", "//status.json", "/STATUS.JSON",
             "/p/narrow/mcp/", "/messages/?session_id=x", "/p/nope/mcp"]
    async with httpx2.AsyncClient(timeout=10) as http:
        for path in paths:
            r = await http.get(f"{hub.base}{path}")
            assert r.status_code in (401, 404), (path, r.status_code)
            assert TOKEN not in r.text
        assert (await http.get(f"{hub.base}/healthz")).status_code == 200
    assert TOKEN not in hub.stderr()
    assert json.dumps(TOKEN)[1:-1] not in hub.stderr()


async def test_sessions_and_sse_ids_do_not_cross_endpoints(hub: HttpHub) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        opened = await http.post(f"{hub.base}/p/narrow/mcp", json=INIT, headers=MCP_HEADERS)
        sid = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        crossed = await http.post(hub.mcp_url, json=ping, headers={**MCP_HEADERS, "Mcp-Session-Id": sid})
        assert crossed.status_code == 404
        own = await http.post(f"{hub.base}/p/narrow/mcp", json=ping,
                              headers={**MCP_HEADERS, "Mcp-Session-Id": sid})
        assert own.status_code == 200
        async with http.stream("GET", f"{hub.base}/sse", headers=AUTH) as stream:
            endpoint = ""
            lines = stream.aiter_lines()  # kept: a collected line iterator closes the stream
            async for line in lines:
                if line.startswith("data: "):
                    endpoint = line[len("data: "):]
                    break
            assert endpoint.startswith("/messages/?session_id=")
            session_id = endpoint.split("=", 1)[1]
            post_headers = {"Content-Type": "application/json", **AUTH}
            other = await http.post(f"{hub.base}/p/narrow/messages/?session_id={session_id}",
                                    json=INIT, headers=post_headers)
            assert other.status_code == 404
            forged = await http.post(f"{hub.base}/messages/?session_id={'0' * 32}", json=INIT,
                                     headers=post_headers)
            assert forged.status_code == 404
            mine = await http.post(f"{hub.base}{endpoint}", json=INIT, headers=post_headers)
            assert mine.status_code == 202, (endpoint, mine.text)
            await lines.aclose()  # type: ignore[attr-defined]
