"""``mcp-hub status``, ``tools`` and ``call`` ask the hub that serves the config (its
``[hub.http]`` address, a token from ``$MCP_HUB_TOKEN`` or ``--token``) and start the
servers themselves only when no hub answers; each says which it did on stderr, and
stdout holds only the answer (no log lines)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, http_session, hub_env, write_config

pytestmark = pytest.mark.anyio

TOKEN = "cli-client-token-" + "z" * 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _config(tmp: Path, port: int, *, token: bool) -> Path:
    http = f"[hub.http]\nport = {port}\n"
    if token:
        http += f'auth_tokens = ["{TOKEN}"]\n'
    return write_config(tmp, echo_server_toml("echo"), hub=http)


def _cli(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = hub_env()
    env.pop("MCP_HUB_TOKEN", None)
    if token is not None:
        env["MCP_HUB_TOKEN"] = token
    return subprocess.run([PY, "-m", "mcp_hub", *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)


async def _run(*args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    return await anyio.to_thread.run_sync(lambda: _cli(*args, token=token))


async def test_status_tools_and_call_ask_the_running_hub(tmp_path: Path) -> None:
    port = _free_port()
    config = _config(tmp_path, port, token=True)
    base = f"http://127.0.0.1:{port}"
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path, "--port", str(port)) as hub:
            assert hub.port == port
            c = ("--config", str(config))

            # No token: the answer says how to pass one.
            refused = await _run("status", *c)
            assert refused.returncode == 1
            assert "MCP_HUB_TOKEN" in refused.stderr and "--token" in refused.stderr
            assert "Traceback" not in refused.stderr

            status = await _run("status", *c, "--server", "echo", token=TOKEN)
            assert status.returncode == 0, status.stderr
            assert f"asked the hub at {base}" in status.stderr
            assert "echo" in status.stdout and "ready" in status.stdout
            flagged = await _run("status", *c, "--json", "--token", TOKEN)
            assert [u["name"] for u in json.loads(flagged.stdout)["upstreams"]] == ["echo"]

            # tools: what a client of this hub sees, as JSON on stdout and nothing else.
            listed = await _run("tools", *c, "--json", token=TOKEN)
            assert listed.returncode == 0, listed.stderr
            names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
            async with http_session(hub.mcp_url,
                                    headers={"Authorization": f"Bearer {TOKEN}"}) as session:
                seen = {t.name for t in (await session.list_tools()).tools}
            assert names == seen
            only = await _run("tools", *c, "--json", "--server", "echo", token=TOKEN)
            only_names = {t["name"] for t in json.loads(only.stdout)["tools"]}
            assert "echo_add" in only_names and "hub_status" not in only_names
            assert "INFO" not in listed.stderr + only.stderr

            # call: by its exposed name, or by its upstream name with --server.
            for name, extra in (("echo_add", ()), ("add", ("--server", "echo"))):
                called = await _run("call", name, "--args", '{"a": 2, "b": 40}', *extra, *c,
                                    token=TOKEN)
                assert called.returncode == 0, called.stderr
                assert json.loads(called.stdout)["structuredContent"] == {"sum": 42}
                assert f"asked the hub at {base}" in called.stderr
            async with httpx2.AsyncClient() as client:
                seen_calls = (await client.get(
                    f"{base}/status.json",
                    headers={"Authorization": f"Bearer {TOKEN}"})).json()["recent_calls"]
            assert [c["tool"] for c in seen_calls].count("echo_add") == 2
            for proc in (refused, status, flagged, listed, only, called):
                assert TOKEN not in proc.stdout + proc.stderr


async def test_without_a_running_hub_they_start_the_servers_and_say_so(tmp_path: Path) -> None:
    port = _free_port()
    config = _config(tmp_path, port, token=False)
    c = ("--config", str(config))
    with anyio.fail_after(240):
        listed = await _run("tools", *c, "--json")
        assert listed.returncode == 0, listed.stderr
        assert "echo_add" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
        assert f"no hub answers at http://127.0.0.1:{port}" in listed.stderr
        assert "started 1 server" in listed.stderr
        assert "INFO" not in listed.stderr

        table = await _run("tools", *c)
        assert "(unavailable: set [builtins.file] roots to list it)" in table.stdout
        assert "(unavailable)" not in table.stdout

        status = await _run("status", *c)
        assert status.returncode == 0, status.stderr
        assert "echo" in status.stdout and "ready" in status.stdout

        called = await _run("call", "add", "--server", "echo", "--args", '{"a": 1, "b": 2}', *c)
        assert called.returncode == 0, called.stderr
        assert json.loads(called.stdout)["structuredContent"] == {"sum": 3}
        assert "started 1 server" in called.stderr and "INFO" not in called.stderr


def test_the_client_side_starts_without_the_mcp_sdk() -> None:
    # What makes a call to a running hub quick: asking it imports neither the SDK nor the models.
    code = ("import sys; from mcp_hub.cli import hub_client, main; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', "
            "'mcp_types', 'pydantic'))))")
    out = subprocess.run([PY, "-c", code], cwd=str(ROOT), env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
