"""``mcp-hub install|uninstall`` on real-shaped client config files, in temporary homes."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.cli.main import main
from mcp_hub.clients import install, jsonedit
from mcp_hub.errors import HubError
from tests.hubtest import PY, ROOT, hub_env

SHIPPED = str(ROOT / "servers.toml")

CLAUDE_DESKTOP = """{
  "globalShortcut": "Alt+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        "/Users/me/Desktop"
      ]
    },
    "github": {
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_notarealtoken"
      }
    }
  }
}
"""

CLAUDE_CODE = """{
  "numStartups": 42,
  "installMethod": "npm",
  "autoUpdates": true,
  "tipsHistory": {
    "new-user-warmup": 1,
    "memory-command": 7
  },
  "projects": {
    "/home/me/src/app": {
      "allowedTools": [],
      "mcpServers": {
        "local-db": {
          "type": "stdio",
          "command": "uvx",
          "args": ["mcp-server-sqlite", "--db-path", "app.db"],
          "env": {}
        }
      },
      "hasTrustDialogAccepted": true
    }
  },
  "mcpServers": {
    "sentry": {
      "type": "http",
      "url": "https://mcp.sentry.dev/mcp"
    }
  },
  "userID": "0123abcd"
}"""

CURSOR = """{
    "mcpServers": {
        "context7": {
            "url": "https://mcp.context7.com/mcp",
            "headers": {
                "CONTEXT7_API_KEY": "${env:CONTEXT7_API_KEY}"
            }
        },
        "playwright": {
            "command": "npx",
            "args": ["@playwright/mcp@latest"]
        }
    }
}
"""

VSCODE = """// My MCP servers (VS Code reads this file as JSON with comments)
{
\t"servers": {
\t\t"github": {
\t\t\t"type": "http",
\t\t\t"url": "https://api.githubcopilot.com/mcp/"
\t\t},
\t\t/* a local one */
\t\t"memory": {
\t\t\t"type": "stdio",
\t\t\t"command": "npx",
\t\t\t"args": ["-y", "@modelcontextprotocol/server-memory"],
\t\t},
\t},
\t"inputs": [
\t\t{"type": "promptString", "id": "token", "description": "API token", "password": true},
\t],
}
"""

MALFORMED = {
    "claude-desktop": '{\n  "mcpServers": {\n    "a": {"command": "x"},\n  }\n}\n',
    "claude-code": '{\n  "numStartups": 3,\n  "mcpServers": {\n',
    "cursor": '{\n  "mcpServers": {\n    "a": {"command": "x"}\n  }\n}\n}\n',
    "vscode": '{\n\t"servers": {\n\t\t"a": {"type": "stdio" "command": "x"}\n\t}\n}\n',
}
EXISTING = {"claude-desktop": CLAUDE_DESKTOP, "claude-code": CLAUDE_CODE, "cursor": CURSOR,
            "vscode": VSCODE}
CLIENTS = list(EXISTING)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary home; no XDG overrides; no `claude` CLI on PATH."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    return home


def _file(client: str, home: Path) -> Path:
    return install.target(client, home=home).path


def _entry(client: str, path: Path, name: str = "mcp-hub") -> Any:
    container = "servers" if client == "vscode" else "mcpServers"
    value, _ = jsonedit.parse(path.read_text(), comments=client == "vscode")
    return value.get(container, {}).get(name)


def _inserted(before: str, after: str) -> str:
    """What ``after`` adds to ``before``; fails unless it is one contiguous insertion."""
    i = 0
    while i < min(len(before), len(after)) and before[i] == after[i]:
        i += 1
    j = 0
    while j < len(before) - i and before[-1 - j] == after[-1 - j]:
        j += 1
    assert i + j == len(before), "the file changed outside the inserted entry"
    return after[i:len(after) - j]


def _run(*argv: str) -> int:
    return main(list(argv))


def _siblings(path: Path) -> set[str]:
    return {p.name for p in path.parent.iterdir()}


@pytest.mark.parametrize("client", CLIENTS)
def test_install_into_a_file_with_other_servers_and_uninstall_again(
    client: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(client, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXISTING[client])
    before = path.read_bytes()

    assert _run("install", client, "--config", SHIPPED) == 0
    after = path.read_text()
    entry = _entry(client, path)
    assert entry["args"][-2:] == ["--config", SHIPPED]
    assert os.path.isabs(entry["command"]) and "PATH" in entry["env"]
    # Byte for byte, the only change is the hub's member (and the separator before it).
    added = _inserted(before.decode(), after).strip().strip(",").strip()
    assert json.loads("{" + added + "}") == {"mcp-hub": entry}
    backups = [p for p in path.parent.iterdir() if p.name.endswith(".bak")]
    assert len(backups) == 1 and backups[0].read_bytes() == before
    assert "added 'mcp-hub' to" in capsys.readouterr().err

    assert _run("uninstall", client) == 0
    assert path.read_bytes() == before
    assert not [n for n in _siblings(path) if n.endswith(".tmp")]


@pytest.mark.parametrize("client", CLIENTS)
def test_install_into_a_missing_file_creates_it(client: str, home: Path) -> None:
    path = _file(client, home)
    assert not path.exists()
    assert _run("install", client, "--config", SHIPPED, "--name", "hub") == 0
    entry = _entry(client, path, "hub")
    assert entry["args"][-2:] == ["--config", SHIPPED]
    assert entry.get("type") == ("stdio" if client in ("vscode", "claude-code") else None)
    assert not [n for n in _siblings(path) if n.endswith((".bak", ".tmp"))]
    assert _run("uninstall", client, "--name", "hub") == 0
    assert not path.exists()  # install created it: uninstall leaves no "{}" behind
    assert not [n for n in _siblings(path) if "mcp-hub" in n]
    assert _run("uninstall", client, "--name", "hub") == 0  # nothing left: a no-op


@pytest.mark.parametrize("client", ["cursor", "vscode"])
def test_a_created_file_that_gained_other_servers_is_kept(client: str, home: Path) -> None:
    path = _file(client, home)
    assert _run("install", client, "--config", SHIPPED, "--name", "hub") == 0
    assert _run("install", client, "--config", SHIPPED, "--name", "other") == 0
    assert _run("uninstall", client, "--name", "hub") == 0
    assert _entry(client, path, "other") is not None
    assert _run("uninstall", client, "--name", "other") == 0
    assert not path.exists()


def test_a_file_that_existed_keeps_its_empty_shape(home: Path) -> None:
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {}}\n')
    assert _run("install", "cursor", "--config", SHIPPED) == 0
    assert _run("uninstall", "cursor") == 0
    assert path.exists() and "mcp-hub" not in json.loads(path.read_text()).get("mcpServers", {})


def test_backups_do_not_pile_up(home: Path, tmp_path: Path) -> None:
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_text(CURSOR)
    elsewhere = tmp_path / "kept.txt"
    elsewhere.write_text("mine\n")
    planted = path.with_name(f"{path.name}.mcp-hub-19990101T000000-planted.bak")
    planted.symlink_to(elsewhere)
    for _ in range(2 * install.KEEP_BACKUPS):
        assert _run("install", "cursor", "--config", SHIPPED) == 0
        assert _run("uninstall", "cursor") == 0
    backups = [p for p in path.parent.iterdir() if p.name.endswith(".bak") and not p.is_symlink()]
    assert len(backups) == install.KEEP_BACKUPS
    assert planted.is_symlink() and elsewhere.read_text() == "mine\n"  # not ours: left alone
    assert path.read_text() == CURSOR


@pytest.mark.parametrize("client", CLIENTS)
def test_a_malformed_file_is_an_error_and_stays_as_it_was(
    client: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(client, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MALFORMED[client])
    names = _siblings(path)
    assert _run("install", client, "--config", SHIPPED) == 1
    err = capsys.readouterr().err
    assert f"{path}: invalid JSON at line" in err and "the file was not changed" in err
    assert _run("uninstall", client) == 1
    assert path.read_text() == MALFORMED[client]
    assert _siblings(path) == names


@pytest.mark.parametrize("client", CLIENTS)
def test_a_second_install_changes_nothing_and_a_different_entry_needs_force(
    client: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(client, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXISTING[client])
    assert _run("install", client, "--config", SHIPPED) == 0
    once, names = path.read_bytes(), _siblings(path)
    assert _run("install", client, "--config", SHIPPED) == 0
    assert path.read_bytes() == once and _siblings(path) == names
    assert "nothing to do" in capsys.readouterr().err

    url = "http://127.0.0.1:8765/mcp"
    if client == "claude-desktop":
        assert _run("install", client, "--url", url) == 1
        assert "Settings > Connectors" in capsys.readouterr().err
        return
    assert _run("install", client, "--url", url) == 1
    assert "already has a different server named 'mcp-hub'" in capsys.readouterr().err
    assert path.read_bytes() == once
    assert _run("install", client, "--url", url, "--force") == 0
    assert _entry(client, path)["url"] == url
    # Replacing changed only the hub's value: uninstall restores the original bytes.
    assert _run("uninstall", client) == 0
    assert path.read_text() == EXISTING[client]


def test_client_files_per_system(tmp_path: Path) -> None:
    home = tmp_path
    mac = home / "Library" / "Application Support"
    appdata = tmp_path / "AppData" / "Roaming"
    win = {"APPDATA": str(appdata)}
    expect = {
        ("claude-desktop", "linux"): home / ".config" / "Claude" / "claude_desktop_config.json",
        ("claude-desktop", "darwin"): mac / "Claude" / "claude_desktop_config.json",
        ("claude-desktop", "win32"): appdata / "Claude" / "claude_desktop_config.json",
        ("vscode", "linux"): home / ".config" / "Code" / "User" / "mcp.json",
        ("vscode", "darwin"): mac / "Code" / "User" / "mcp.json",
        ("vscode", "win32"): appdata / "Code" / "User" / "mcp.json",
        ("cursor", "linux"): home / ".cursor" / "mcp.json",
        ("cursor", "win32"): home / ".cursor" / "mcp.json",
        ("claude-code", "darwin"): home / ".claude.json",
    }
    for (client, system), path in expect.items():
        got = install.target(client, home=home, platform=system, environ=win)
        assert got.path == path
        assert got.container == ("servers" if client == "vscode" else "mcpServers")


def test_claude_code_uses_its_own_cli_when_it_is_there(tmp_path: Path) -> None:
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.jsonl"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                    f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n")
    fake.chmod(0o755)
    state = tmp_path / ".claude.json"
    target = install.target("claude-code", home=tmp_path)
    entry = {"type": "stdio", "command": "/opt/hub/bin/mcp-hub", "args": ["serve"]}
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}

    done = install.install(target, "mcp-hub", entry, environ=env)
    assert done.changed
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0][:5] == ["mcp", "add-json", "--scope", "user", "mcp-hub"]
    assert json.loads(calls[0][5]) == entry
    # The CLI wrote it (as it would): a second install is a no-op; a different one needs force.
    state.write_text(json.dumps({"mcpServers": {"mcp-hub": entry}}))
    assert not install.install(target, "mcp-hub", entry, environ=env).changed
    with pytest.raises(HubError, match="--force"):
        install.install(target, "mcp-hub", {**entry, "args": []}, environ=env)
    install.install(target, "mcp-hub", {**entry, "args": []}, force=True, environ=env)
    assert install.uninstall(target, "mcp-hub", environ=env).changed
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[:2] for c in calls[1:]] == [["mcp", "remove"], ["mcp", "add-json"],
                                          ["mcp", "remove"]]
    assert calls[-1] == ["mcp", "remove", "--scope", "user", "mcp-hub"]


def test_a_symlinked_config_stays_a_symlink(home: Path) -> None:
    real = home / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text(CURSOR)
    link = _file("cursor", home)
    link.parent.mkdir()
    link.symlink_to(real)
    assert _run("install", "cursor", "--config", SHIPPED) == 0
    assert link.is_symlink() and _entry("cursor", real) is not None


def test_a_file_that_is_not_utf8_is_left_alone(home: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')
    assert _run("install", "cursor", "--config", SHIPPED) == 1
    assert "not UTF-8" in capsys.readouterr().err
    assert path.read_bytes() == b'{"mcpServers": {"caf\xe9": {"command": "x"}}}'


def test_without_a_config_install_warns_that_the_hub_would_have_no_servers(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(home)
    monkeypatch.delenv("MCP_HUB_CONFIG", raising=False)
    assert _run("install", "cursor") == 0
    assert "no servers.toml found" in capsys.readouterr().err
    assert _entry("cursor", _file("cursor", home))["args"] == ["serve"]


def test_a_bom_and_crlf_line_endings_are_kept(home: Path) -> None:
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    original = "\ufeff" + CURSOR.replace("\n", "\r\n")
    path.write_bytes(original.encode())
    assert _run("install", "cursor", "--config", SHIPPED) == 0
    text = path.read_bytes().decode()
    assert text.startswith("\ufeff") and "\n" not in text.replace("\r\n", "")
    assert _run("uninstall", "cursor") == 0
    assert path.read_bytes() == original.encode()


def test_planted_symlinks_at_the_temp_and_backup_names_are_never_followed(
        home: Path, tmp_path: Path) -> None:
    """Someone who can write the folder plants a symlink at the temporary file's old,
    predictable name (pointing at a file of the user's) and dangling ones at the backup
    names of the next seconds: install writes neither through them, nor creates the
    files they point at."""
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_text(CURSOR)
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious\n")
    path.with_name(f".{path.name}.mcp-hub-{os.getpid()}.tmp").symlink_to(victim)
    now = time.time()
    planted = []
    for second in range(-1, 30):  # every backup name the next half minute could use
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now + second))
        target = outside / f"created-{second}"
        path.with_name(f"{path.name}.mcp-hub-{stamp}.bak").symlink_to(target)
        planted.append(target)
    assert _run("install", "cursor", "--config", SHIPPED) == 0
    assert _entry("cursor", path) is not None and not path.is_symlink()
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    backups = [p for p in path.parent.iterdir() if p.name.endswith(".bak") and not p.is_symlink()]
    assert len(backups) == 1 and backups[0].read_text() == CURSOR
    assert (backups[0].stat().st_mode & 0o777) == 0o600
    assert _run("uninstall", "cursor") == 0
    assert victim.read_text() == "precious\n" and path.read_text() == CURSOR
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]


def test_a_symlink_at_the_lock_name_is_refused(home: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _file("cursor", home)
    path.parent.mkdir(parents=True)
    path.write_text(CURSOR)
    elsewhere = tmp_path / "elsewhere.lock"
    path.with_name(f".{path.name}.mcp-hub.lock").symlink_to(elsewhere)
    assert _run("install", "cursor", "--config", SHIPPED) == 1
    assert "lock file" in capsys.readouterr().err
    assert path.read_text() == CURSOR and not elsewhere.exists()


def test_concurrent_installs_into_one_file_keep_every_entry(home: Path) -> None:
    """Ten ``mcp-hub install`` processes at once, each adding its own name to one file
    that already holds one server: all eleven entries are there afterwards."""
    path = home / "shared.json"
    path.write_text('{\n  "mcpServers": {\n    "first": {"command": "x"}\n  }\n}\n')
    env = {**hub_env(), "HOME": str(home)}
    procs = [subprocess.Popen([PY, "-m", "mcp_hub", "install", "cursor", "--file", str(path),
                               "--name", f"hub{i}", "--config", SHIPPED],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(10)]
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    servers = json.loads(path.read_text())["mcpServers"]
    assert sorted(servers) == sorted(["first", *(f"hub{i}" for i in range(10))])
    assert not [p for p in home.iterdir() if p.name.endswith(".tmp")]
