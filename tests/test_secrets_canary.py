"""A canary secret through a whole hub session: it must not appear in any output that is
not the authenticated caller's own data.

Where the line is: a tool *result* is the upstream's answer to the caller who
asked for it — ``echo_env`` returning the value of ``API_KEY``, or a failing
tool whose error text quotes it — and reaches that caller unchanged (the hub
does not rewrite upstream data). Everything the hub says *about* itself or an
upstream — logs at debug level, ``/status.json``, ``/metrics``, ``hub_status``,
``mcp-hub check`` and ``mcp-hub tools``, HTTP error bodies, hub-made error
results (connection lost, timeouts), the stderr of upstreams relayed to the
hub's log — must not contain it.

The canaries: one value interpolated into a stdio upstream's ``env``, one into
an HTTP upstream's ``Authorization`` header, one as the hub's own bearer token,
and one in the userinfo of an unreachable upstream's URL.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import warnings
from pathlib import Path

import anyio
import httpx2
import mcp.types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.fixtures_upstream import http_upstream
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, http_session, hub_env, write_config

pytestmark = pytest.mark.anyio

ENV_CANARY = "canary-env-" + secrets.token_hex(12)
HEADER_CANARY = "canary-hdr-" + secrets.token_hex(12)
TOKEN_CANARY = "canary-tok-" + secrets.token_hex(12)
URL_CANARY = "canary-url-" + secrets.token_hex(12)
CANARIES = (ENV_CANARY, HEADER_CANARY, TOKEN_CANARY, URL_CANARY)


@pytest.fixture(autouse=True)
def canary_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_API_KEY", ENV_CANARY)
    monkeypatch.setenv("CANARY_HEADER", HEADER_CANARY)
    monkeypatch.setenv("CANARY_HUB_TOKEN", TOKEN_CANARY)
    monkeypatch.setenv("CANARY_URL_PASSWORD", URL_CANARY)


def config_body(web_port: int, *, with_token: bool) -> tuple[str, str]:
    broken = (f'[servers.broken]\ncommand = "{PY}"\nargs = ["-c", "import os, sys; '
              "print('fatal: bad key ' + os.environ['API_KEY'], file=sys.stderr); sys.exit(3)\"]\n"
              'env = { API_KEY = "${CANARY_API_KEY}" }\n')
    body = (
        echo_server_toml(env={"API_KEY": "${CANARY_API_KEY}"})
        + f'[servers.web]\nurl = "http://127.0.0.1:{web_port}/mcp"\n'
        + 'headers = { Authorization = "Bearer ${CANARY_HEADER}" }\n'
        + '[servers.gone]\nurl = "http://admin:${CANARY_URL_PASSWORD}@127.0.0.1:9/mcp"\n'
        + "connect_timeout = 2\n"
        + broken
    )
    hub = 'log_level = "debug"\nstate_dir = "STATE"\n'
    if with_token:
        hub += '[hub.http]\nauth_tokens = ["${CANARY_HUB_TOKEN}"]\n'
    return body, hub


def leaks(where: str, text: str) -> list[str]:
    return [f"{where}: {c[:14]}…" for c in CANARIES if c in text]


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def exercise(session: ClientSession) -> list[tuple[str, str]]:
    """Calls, errors and status through ``session``; (label, output that is not data)."""
    outputs: list[tuple[str, str]] = []
    with warnings.catch_warnings():  # logging is deprecated in 2026-07-28, still served
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await session.set_logging_level("debug")
    tools = await session.list_tools()
    outputs.append(("tools/list", json.dumps([t.model_dump(mode="json") for t in tools.tools])))
    # The caller's own data: the value of the variable it asked for, an error it provoked.
    data = await session.call_tool("echo_env", {"name": "API_KEY"})
    assert text_of(data) == ENV_CANARY
    failed = await session.call_tool("echo_fail", {"message": f"denied for key {ENV_CANARY}"})
    assert failed.is_error
    # Hub-made results must not carry it.
    web = await session.call_tool("web_echo", {"text": "through the header-authenticated upstream"})
    outputs.append(("web_echo result", text_of(web)))
    for name in ("broken_anything", "gone_anything", "nope"):
        try:
            result = await session.call_tool(name, {})
            outputs.append((f"{name} result", text_of(result)))
        except Exception as exc:
            outputs.append((f"{name} error", str(exc)))
    status = await session.call_tool("hub_status", {})
    outputs.append(("hub_status", text_of(status) + json.dumps(status.structured_content)))
    crash = await session.call_tool("echo_crash", {})
    outputs.append(("crash result", text_of(crash)))
    return outputs


async def test_the_canaries_never_leak_from_an_http_hub_session(tmp_path: Path) -> None:
    found: list[str] = []
    with anyio.fail_after(120):
        async with http_upstream("http") as (port, _):
            body, hub_section = config_body(port, with_token=True)
            config = write_config(tmp_path, body,
                                  hub=hub_section.replace("STATE", str(tmp_path / "state")))
            async with http_hub(config, tmp_path) as hub:
                auth = {"Authorization": f"Bearer {TOKEN_CANARY}"}
                async with http_session(hub.mcp_url, headers=auth) as session:
                    for label, text in await exercise(session):
                        found += leaks(label, text)
                async with httpx2.AsyncClient(timeout=10, headers=auth) as http:
                    for path in ("/status.json", "/metrics", "/", "/healthz", "/readyz"):
                        response = await http.get(f"{hub.base}{path}")
                        found += leaks(path, response.text + str(response.headers))
                    status = (await http.get(f"{hub.base}/status.json")).json()
                    states = {u["name"]: u["state"] for u in status["upstreams"]}
                    assert states["web"] == "ready"
                    assert states["broken"] != "ready" and states["gone"] != "ready"
                    errors = {u["name"]: u["last_error"] or "" for u in status["upstreams"]}
                    assert "fatal: bad key" in errors["broken"]  # the stderr tail is kept…
                    assert "[REDACTED]" in errors["broken"]  # …with the secret cut out
                    wrong = await http.post(hub.mcp_url, headers={
                        "Authorization": f"Bearer {TOKEN_CANARY}x"}, json={})
                    assert wrong.status_code == 401
                    found += leaks("401 body", wrong.text + str(wrong.headers))
                log = hub.stderr()
            assert "DEBUG" in log  # the log really was at debug level
            found += leaks("hub log (debug)", log)
    assert found == []


async def test_the_canaries_never_leak_from_a_stdio_hub_session(tmp_path: Path) -> None:
    found: list[str] = []
    errlog = tmp_path / "stdio-hub-stderr.log"
    with anyio.fail_after(120):
        async with http_upstream("http") as (port, _):
            body, hub_section = config_body(port, with_token=False)
            config = write_config(tmp_path, body,
                                  hub=hub_section.replace("STATE", str(tmp_path / "state")))
            params = StdioServerParameters(
                command=PY, args=["-m", "mcp_hub", "serve", "--config", str(config)],
                cwd=str(ROOT), env=hub_env())
            with errlog.open("w") as err:
                async with stdio_client(params, errlog=err) as (read, write), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    for label, text in await exercise(session):
                        found += leaks(label, text)
            found += leaks("stdio hub log (debug)", errlog.read_text(errors="replace"))
            # The CLI commands that print upstream state.
            for command in (["check"], ["tools"], ["tools", "--json", "--tokens"]):
                done = await anyio.to_thread.run_sync(lambda c=command: subprocess.run(  # type: ignore[misc]
                    [PY, "-m", "mcp_hub", *c, "--config", str(config), "--log-level", "debug"],
                    cwd=str(ROOT), env=hub_env(), capture_output=True, text=True, timeout=90))
                found += leaks(f"mcp-hub {' '.join(command)} stdout", done.stdout)
                found += leaks(f"mcp-hub {' '.join(command)} stderr", done.stderr)
                if command == ["check"]:
                    assert done.returncode == 1  # broken and gone are not ready
                    assert "broken" in done.stdout and "[REDACTED]" in done.stdout
    assert found == []


def test_an_interpolated_secret_in_a_config_error_is_not_echoed(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text('[hub]\nlog_level = "${CANARY_API_KEY}"\n')
    done = subprocess.run([PY, "-m", "mcp_hub", "check", "--config", str(config)], cwd=str(ROOT),
                          env=hub_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "hub.log_level" in done.stderr
    assert leaks("config error", done.stdout + done.stderr) == []
