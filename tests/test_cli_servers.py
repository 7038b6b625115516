"""``mcp-hub add`` / ``mcp-hub remove``: servers.toml edited in place (comments, order and
every other byte kept), validated before anything is written, backed up, replaced
atomically; and a running hub connects the added server and drops the removed one."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.hubtest import PY, ROOT, http_hub, http_session, hub_env, write_config

pytestmark = pytest.mark.anyio

ORIGINAL = """\
# My servers. This comment, the blank lines and the order must survive.

[hub]
startup_timeout = 20   # seconds

[servers.zeta]   # listed first on purpose
command = "zeta-server"
args = ["--x"]

# the one below talks HTTP
[servers.alpha]
url = "http://127.0.0.1:9/mcp"

[tool_search]
mode = "auto"
"""


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    if args and args[0] == "--config":  # options go after the command's name
        args = (args[2], *args[:2], *args[3:])
    return subprocess.run([PY, "-m", "mcp_hub", *args], cwd=str(cwd), env=hub_env(),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_add_and_remove_edit_the_file_in_place(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text(ORIGINAL)
    config.chmod(0o600)
    added = _cli("add", "memory", "--config", str(config), "--env", "TOKEN=${MEMORY_TOKEN}",
                 "--", "npx", "-y", "@modelcontextprotocol/server-memory", "--flag")
    assert added.returncode == 0, added.stderr
    assert added.stdout == ""
    text = config.read_text()
    # Everything that was there is still there, byte for byte, in the same order.
    assert text.replace(
        '[servers.memory]\ncommand = "npx"\n'
        'args = ["-y", "@modelcontextprotocol/server-memory", "--flag"]\n'
        'env = {TOKEN = "${MEMORY_TOKEN}"}\n\n', "") == ORIGINAL
    assert text.index("[servers.alpha]") < text.index("[servers.memory]") < text.index(
        "[tool_search]")
    assert tomllib.loads(text)["servers"]["memory"]["args"][-1] == "--flag"
    assert (tmp_path / "servers.toml.bak").read_text() == ORIGINAL
    for kept in (config, tmp_path / "servers.toml.bak"):  # it may hold tokens
        assert kept.stat().st_mode & 0o777 == 0o600
    assert "picks the change up" in added.stderr

    web = _cli("add", "web", "--url", "https://example.test/sse", "--transport", "sse",
               "--header", "X-Team=blue", "--config", str(config))
    assert web.returncode == 0, web.stderr
    assert tomllib.loads(config.read_text())["servers"]["web"] == {
        "url": "https://example.test/sse", "transport": "sse", "headers": {"X-Team": "blue"}}

    for name in ("web", "memory"):
        removed = _cli("remove", name, "--config", str(config))
        assert removed.returncode == 0, removed.stderr
    assert config.read_text() == ORIGINAL


def test_an_edit_that_would_break_the_config_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text(ORIGINAL)
    cases = [
        (("add", "zeta", "--", "other"), "already has a server named 'zeta'"),
        (("add", "bad", "--url", "ftp://nowhere"), "servers.bad: url"),
        (("add", "both", "--url", "http://h/mcp", "--", "cmd"), "not both"),
        (("add", "no spaces", "--", "cmd"), "server name 'no spaces'"),
        (("remove", "ghost"), "no server named 'ghost' (servers: alpha, zeta)"),
    ]
    for args, message in cases:
        proc = _cli("--config", str(config), *args, cwd=tmp_path)
        assert proc.returncode != 0 and message in proc.stderr, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert config.read_text() == ORIGINAL
    assert not (tmp_path / "servers.toml.bak").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["servers.toml"]  # no temporary left over


def test_add_replace_keeps_the_entry_where_it_stands(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text(ORIGINAL)
    proc = _cli("add", "zeta", "--replace", "--config", str(config), "--", "zeta-server", "--y")
    assert proc.returncode == 0, proc.stderr
    assert config.read_text() == ORIGINAL.replace('args = ["--x"]', 'args = ["--y"]')


def test_add_creates_servers_toml_when_there_is_none(tmp_path: Path) -> None:
    proc = _cli("add", "time", "--", "mcp-server-time", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads((tmp_path / "servers.toml").read_text()) == {
        "servers": {"time": {"command": "mcp-server-time"}}}


async def _names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def test_a_running_hub_connects_an_added_server_and_drops_a_removed_one(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, "", hub="watch_config = true\n")
    changed: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: object) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed[-1].set()
            changed.append(anyio.Event())

    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub, http_session(
                hub.mcp_url, message_handler=on_message) as session:
            assert not any(n.startswith("echo_") for n in await _names(session))
            add = await anyio.to_thread.run_sync(lambda: _cli(
                "add", "echo", "--config", str(config), "--cwd", str(ROOT),
                "--", PY, "-m", "tests.fixtures.echo_server"))
            assert add.returncode == 0, add.stderr
            while "echo_echo" not in await _names(session):
                await changed[-1].wait()
            result = await session.call_tool("echo_add", {"a": 1, "b": 2})
            assert result.structured_content == {"sum": 3}
            remove = await anyio.to_thread.run_sync(
                lambda: _cli("remove", "echo", "--config", str(config)))
            assert remove.returncode == 0, remove.stderr
            while any(n.startswith("echo_") for n in await _names(session)):
                await changed[-1].wait()
            assert "config reloaded" in hub.stderr()
