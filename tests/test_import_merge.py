"""``mcp-hub import`` leaves out the hub's own entry and servers already in servers.toml;
``--update`` refreshes those in place, every other line of the file kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mcp_hub.clients.import_merge import HubAddress, is_hub_entry, replace_server_tables
from mcp_hub.clients.importer import import_servers
from mcp_hub.config.model import parse_config
from tests.hubtest import PY, ROOT, hub_env

CLIENT = {"mcpServers": {
    "mcp-hub": {"command": "/home/u/mcp-hub/.venv/bin/mcp-hub",
                "args": ["serve", "--config", "/home/u/mcp-hub/servers.toml"]},
    "hub-module": {"command": "python3", "args": ["-m", "mcp_hub", "serve"]},
    "hub-uvx": {"command": "uvx", "args": ["mcp-hub", "serve"]},
    "hub-bridge": {"command": "npx", "args": ["-y", "mcp-remote", "http://127.0.0.1:8765/mcp"]},
    "hub-url": {"url": "http://localhost:8765/mcp"},
    "time": {"command": "uvx", "args": ["mcp-server-time"]},
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
               "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}},
}}


def _client(tmp_path: Path, servers: dict[str, object]) -> Path:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _import(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "mcp_hub", "import", *args], cwd=str(ROOT),
                          env=hub_env(), capture_output=True, text=True, timeout=60)


def test_the_hubs_own_entries_are_never_imported(tmp_path: Path) -> None:
    done = import_servers("claude-desktop", _client(tmp_path, CLIENT["mcpServers"]))
    config = parse_config(done.text(), environ={"GITHUB_TOKEN": "x"})
    assert list(config.servers) == ["time", "github"]
    for name in ("mcp-hub", "hub-module", "hub-uvx", "hub-bridge", "hub-url"):
        assert f"{name}: this is the hub itself; not imported" in done.warnings


def test_the_hubs_address_comes_from_its_config() -> None:
    hub = HubAddress.of_config({"hub": {"http": {"port": 9000}}})
    assert is_hub_entry({"url": "http://127.0.0.1:9000/mcp"}, hub)
    assert not is_hub_entry({"url": "http://127.0.0.1:8765/mcp"}, hub)
    assert not is_hub_entry({"url": "https://api.example.com:9000/mcp"}, hub)
    assert not is_hub_entry({"command": "mcp-hubble"}, hub)


def test_importing_twice_adds_nothing_the_second_time(tmp_path: Path) -> None:
    client = _client(tmp_path, CLIENT["mcpServers"])
    target = tmp_path / "servers.toml"
    target.write_text("# my hub\n[hub]\nname = \"mine\"\n")
    first = _import("claude-desktop", str(client), "-o", str(target))
    assert first.returncode == 0, first.stderr
    once = target.read_text()
    second = _import("claude-desktop", str(client), "-o", str(target))
    assert second.returncode == 0, second.stderr
    assert target.read_text() == once
    names = list(parse_config(once, environ={"GITHUB_TOKEN": "x"}).servers)
    assert names == ["time", "github"]
    assert "time: already in servers.toml as 'time'; not imported again (--update " \
           "refreshes it)" in second.stderr
    assert "nothing to add" in second.stderr


def test_the_same_command_under_another_name_is_already_present(tmp_path: Path) -> None:
    client = _client(tmp_path, {"clock": {"command": "uvx", "args": ["mcp-server-time"]}})
    done = import_servers("claude-desktop", client,
                          existing={"time": {"command": "uvx", "args": ["mcp-server-time"]}})
    assert not done.new
    assert done.warnings == ["clock: already in servers.toml as 'time'; not imported again "
                             "(--update refreshes it)"]


def test_update_refreshes_a_server_in_place_and_keeps_every_other_line(tmp_path: Path) -> None:
    target = tmp_path / "servers.toml"
    target.write_text(
        "# my hub\n[hub]\nname = \"mine\"\n\n"
        "# GitHub: needs GITHUB_TOKEN\n[servers.github]\ncommand = \"old-github\"\n"
        "timeout = 5\n\n[servers.github.env]\nOLD = \"1\"\n\n"
        "# the clock\n[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n")
    client = _client(tmp_path, {"github": CLIENT["mcpServers"]["github"],
                                "fetch": {"command": "uvx", "args": ["mcp-server-fetch"]}})
    done = _import("claude-desktop", str(client), "-o", str(target), "--update")
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert text.startswith("# my hub\n[hub]\nname = \"mine\"\n\n# GitHub: needs GITHUB_TOKEN\n"
                           "[servers.github]\ncommand = \"npx\"\n")
    assert "old-github" not in text and "OLD" not in text
    assert "# the clock\n[servers.time]\ncommand = \"uvx\"\nargs = [\"mcp-server-time\"]\n" in text
    config = parse_config(text, environ={"GITHUB_TOKEN": "x"})
    assert list(config.servers) == ["github", "time", "fetch"]
    assert config.servers["github"].args == ["-y", "@modelcontextprotocol/server-github"]
    assert "1 added, 1 refreshed" in done.stderr


def test_replacing_tables_leaves_inline_tables_alone() -> None:
    text = "[servers]\ngithub = { command = \"x\" }\n"
    merged, missing = replace_server_tables(text, {"github": "[servers.github]\ncommand = \"y\""})
    assert merged == text and missing == ["github"]
