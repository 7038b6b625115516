"""The hub as a desktop client or IDE starts it: bare PATH, cwd /, exactly the printed entry.

``mcp-hub config snippet CLIENT`` is run in this repository (as a user would after
``make run``); its command and args are then started with ``PATH=/usr/bin:/bin``,
``HOME`` and the snippet's ``env`` — nothing else from the shell — in ``/``. Every
shipped server must be ready, and the git server must serve this repository.
The README's "Connecting a client" commands are run as written, too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

from mcp_hub.clients import install, jsonedit
from tests.hubtest import EVERYTHING, ROOT

pytestmark = pytest.mark.anyio

HUB = Path(sys.prefix) / "bin" / "mcp-hub"
SHIPPED_SERVERS = ("time", "git", "everything")


def _require_shipped_servers() -> None:
    missing = [p for p in (EVERYTHING, HUB.parent / "mcp-server-time",
                           HUB.parent / "mcp-server-git") if not p.exists()]
    if missing:
        why = f"shipped servers not installed (make setup): {', '.join(map(str, missing))}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def _text(result: Any) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


async def _start_as_a_client_would(entry: dict[str, Any], home: Path, log: Path) -> None:
    """Start ``entry`` with a GUI app's environment in ``/``; check every shipped server."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), **entry.get("env", {})}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env,
                                   cwd="/")
    with log.open("w") as err, anyio.fail_after(90):
        async with (stdio_client(params, errlog=err) as (read, write),
                    ClientSession(read, write) as session):
            await session.initialize()
            while True:  # a loaded machine may need more than startup_timeout; bounded above
                status = json.loads(_text(await session.call_tool("hub_status", {})))
                states = {u["name"]: u["state"] for u in status["upstreams"]}
                assert set(states.values()) <= {"ready", "connecting"}, status["summary"]
                if set(states.values()) == {"ready"}:
                    break
                await anyio.sleep(0.2)
            assert sorted(states) == sorted(SHIPPED_SERVERS), log.read_text()[-3000:]
            tools = {t.name for t in (await session.list_tools()).tools}
            assert status["summary"] == f"All 3 upstream MCP servers are connected " \
                f"({sum(u['tools'] for u in status['upstreams'])} tools)."
            assert {"time_get_current_time", "git_status", "ev_echo"} <= tools
            # The git server is on this repository: a repo_path outside it is refused.
            here = await session.call_tool("git_status", {"repo_path": str(ROOT)})
            assert not here.is_error, _text(here)
            assert "branch" in _text(here).lower()
            elsewhere = await session.call_tool("git_status", {"repo_path": "/"})
            assert elsewhere.is_error or "outside" in _text(elsewhere).lower()


def _snippet(client: str) -> dict[str, Any]:
    done = subprocess.run([str(HUB), "config", "snippet", client], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    assert "warning" not in done.stderr, done.stderr
    doc = json.loads(done.stdout)
    return doc["servers" if client == "vscode" else "mcpServers"]["mcp-hub"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "cursor", "vscode"])
async def test_the_printed_snippet_starts_every_shipped_server_from_a_bare_environment(
    client: str, tmp_path: Path,
) -> None:
    _require_shipped_servers()
    entry = _snippet(client)
    assert Path(entry["command"]).is_absolute()
    assert entry["args"] == ["serve", "--config", str(ROOT / "servers.toml")]
    assert entry.get("type") == ("stdio" if client in ("vscode", "claude-code") else None)
    await _start_as_a_client_would(entry, tmp_path, tmp_path / "hub.log")


def test_the_snippet_warns_about_a_command_it_cannot_find(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text('[servers.gone]\ncommand = "mcp-server-gone-missing"\n')
    done = subprocess.run([str(HUB), "config", "snippet", "cursor", "--config", str(config)],
                          cwd="/", capture_output=True, text=True, timeout=60, check=True)
    assert "warning: server 'gone': command not found: mcp-server-gone-missing" in done.stderr
    assert json.loads(done.stdout)["mcpServers"]["mcp-hub"]["args"][-1] == str(config)


def test_a_variable_the_client_will_not_pass_is_named_and_not_copied(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text('[servers.api]\ncommand = "/bin/cat"\n'
                      'env = { TOKEN = "${HUB_TEST_TOKEN}", PLAIN = "$${NOT_A_VAR}", '
                      'OPT = "${HUB_TEST_OPTIONAL:-x}" }\n')
    env = {"PATH": "/usr/bin:/bin", "HUB_TEST_TOKEN": "s3cret-value-here"}
    for environ in (env, {"PATH": "/usr/bin:/bin"}):  # set in the shell, or not
        done = subprocess.run([str(HUB), "config", "snippet", "cursor", "--config", str(config)],
                              cwd="/", env=environ, capture_output=True, text=True, timeout=60,
                              check=True)
        assert 'reads ${HUB_TEST_TOKEN} from the hub\'s environment' in done.stderr
        assert "NOT_A_VAR" not in done.stderr and "HUB_TEST_OPTIONAL" not in done.stderr
        assert "s3cret-value-here" not in done.stdout + done.stderr
        assert "env" in json.loads(done.stdout)["mcpServers"]["mcp-hub"]


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Connecting a client", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


async def test_the_readme_commands_work_as_written(tmp_path: Path) -> None:
    _require_shipped_servers()
    commands = _readme_commands()
    clients = ("claude-desktop", "claude-code", "cursor", "vscode")
    for client in clients:  # one line each, at most three
        assert 1 <= sum(client in line for line in commands) <= 3
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    for line in commands:
        subprocess.run(["bash", "-euc", line], cwd=ROOT, env=env, check=True, timeout=60,
                       capture_output=True)
    for client in clients:
        t = install.target(client, home=tmp_path)
        value, _ = jsonedit.parse(t.path.read_text(), comments=t.comments)
        entry = value[t.container]["mcp-hub"]
        assert entry["args"] == ["serve", "--config", str(ROOT / "servers.toml")]
        assert entry == _snippet(client)
    # What Claude Desktop will start works from its bare environment.
    t = install.target("claude-desktop", home=tmp_path)
    entry = json.loads(t.path.read_text())["mcpServers"]["mcp-hub"]
    await _start_as_a_client_would(entry, tmp_path, tmp_path / "hub.log")
