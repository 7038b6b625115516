"""SIGTERM drains: calls in flight finish, new requests get 503, the rest end with an error.

A real HTTP hub with one real stdio upstream (``plain_server``: ``sleep`` answers
after a while, ``hang`` never does). Ten calls are in flight when the hub gets
SIGTERM: the five that finish within the drain period get their answers, the
five still running at its end get an error result (and the upstream gets
``notifications/cancelled``), and the hub exits 0 leaving no process behind.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp.client.session import ClientSession

from tests.fixtures_upstream import FIXTURES, PY, toml_str
from tests.hubtest import ROOT, http_hub, http_session, hub_env
from tests.test_orphans import _alive, _pids

pytestmark = pytest.mark.anyio

DRAIN_SECONDS = 3


def _config(tmp: Path) -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        f"[hub]\nstartup_timeout = 20\ndrain_seconds = {DRAIN_SECONDS}\n\n"
        f"[servers.work]\ncommand = {toml_str(PY)}\n"
        f"args = [{toml_str(str(FIXTURES / 'plain_server.py'))}]\n"
        f"env = {{ PLAIN_MARKER = {toml_str(str(tmp / 'marker'))}, "
        f"PLAIN_PID_FILE = {toml_str(str(tmp / 'pids'))} }}\n")
    return path


async def _call(session: ClientSession, name: str, arguments: dict[str, Any]) -> str:
    try:
        result = await session.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments)),
            types.CallToolResult)
    except Exception as exc:  # recorded, and the assertions below say what was expected
        return f"exception: {exc}"
    text = "".join(getattr(c, "text", "") for c in result.content)
    return f"error: {text}" if result.is_error else text


async def _in_flight(http: httpx2.AsyncClient, base: str) -> int:
    status = json.loads((await http.get(f"{base}/status.json")).text)
    return int(next(u for u in status["upstreams"] if u["name"] == "work")["in_flight"])


async def test_sigterm_with_ten_calls_in_flight_over_http(tmp_path: Path) -> None:
    config = _config(tmp_path)
    answers: list[str] = []
    with anyio.fail_after(120):
        async with (
            http_hub(config, tmp_path) as hub,
            httpx2.AsyncClient() as http,
            http_session(hub.mcp_url) as session,
        ):

            async def one(name: str, arguments: dict[str, Any]) -> None:
                answers.append(await _call(session, name, arguments))

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one, "work_sleep", {"seconds": 1.5})
                    tg.start_soon(one, "work_hang", {})
                while await _in_flight(http, hub.base) < 10:  # bounded by fail_after
                    await anyio.sleep(0.05)
                hub.proc.send_signal(signal.SIGTERM)
                while True:  # a new session is refused once the drain has begun
                    r = await http.post(hub.mcp_url, json={
                        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                            "protocolVersion": "2025-06-18", "capabilities": {},
                            "clientInfo": {"name": "late", "version": "1"}}},
                        headers={"Accept": "application/json, text/event-stream"})
                    if r.status_code == 503:
                        break
                    await anyio.sleep(0.05)
                assert r.headers.get("retry-after")
                ready = await http.get(f"{hub.base}/readyz")
                assert ready.status_code == 503
            code = await anyio.to_thread.run_sync(lambda: hub.proc.wait(30))
            assert code == 0, hub.stderr()
    assert sorted(answers).count("slept") == 5, answers
    cancelled = [a for a in answers if a.startswith("error:")]
    assert len(cancelled) == 5, answers
    assert all("drain period" in a for a in cancelled)
    marker = (tmp_path / "marker").read_text()
    assert marker.count("cancelled") == 5
    assert not [p for p in _pids(tmp_path / "pids") if _alive(p)]
    assert "drain period over: 5 call(s) still running were cancelled" in hub.stderr()


async def test_sigterm_over_stdio_ends_running_calls_with_an_error(tmp_path: Path) -> None:
    config = _config(tmp_path)
    proc = subprocess.Popen(
        [PY, "-m", "mcp_hub", "serve", "--config", str(config)], cwd=str(ROOT), env=hub_env(),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def send(message: dict[str, Any]) -> None:
        stdin.write(json.dumps(message).encode() + b"\n")
        stdin.flush()

    try:
        with anyio.fail_after(60):
            send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            await anyio.to_thread.run_sync(stdout.readline)
            send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "work_sleep", "arguments": {"seconds": 1}}})
            send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "work_hang", "arguments": {}}})
            marker = tmp_path / "marker"
            while not marker.exists() or marker.read_text().count("called") < 2:
                await anyio.sleep(0.05)  # until both calls reached the upstream (bounded)
            proc.send_signal(signal.SIGTERM)
            replies = {}
            while len(replies) < 2:
                line = await anyio.to_thread.run_sync(stdout.readline)
                assert line, "the hub closed stdout before answering both calls"
                message = json.loads(line)
                if message.get("id") in (1, 2):
                    replies[message["id"]] = message
            code = await anyio.to_thread.run_sync(lambda: proc.wait(30))
        assert code == 0
        assert replies[1]["result"]["content"][0]["text"] == "slept"
        hung = replies[2]["result"]
        assert hung["isError"] and "drain period" in hung["content"][0]["text"]
        assert not [p for p in _pids(tmp_path / "pids") if _alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
