"""What a newcomer types: the HTTP hub's start-up hint is made of commands that work as
printed, snippets and installs of a running hub can send a token the client reads from
its environment (``--token-env``), and the README's command table names every command."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_hub.cli.main import build_parser, main
from mcp_hub.clients.launch import shell_command
from mcp_hub.config.commands import hub_bin_dir
from tests.hubtest import ROOT, echo_server_toml, http_hub, hub_env, write_config

TOKEN = "hint-token-" + "q" * 24


@pytest.mark.anyio
async def test_the_start_up_hint_prints_commands_that_work(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"),
                          hub=f'[hub.http]\nauth_tokens = ["{TOKEN}"]\n')
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub:
            text = hub.stderr()
    commands = [line.strip() for line in text.splitlines()
                if line.startswith("  ") and " install " in line]
    assert len(commands) == 4, text
    assert "claude-desktop --url" not in text and "claude-desktop|" not in text
    env = {**hub_env(), "MCP_HUB_TOKEN": TOKEN}
    for command in commands:
        argv = shlex.split(command)
        client = argv[argv.index("install") + 1]
        target = tmp_path / f"{client}.json"
        done = subprocess.run([*argv, "--file", str(target)], cwd=str(ROOT), env=env,
                              capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (command, done.stderr)
        written = json.loads(target.read_text())
        entry = next(iter(next(iter(written.values())).values()))
        if client == "claude-desktop":
            assert entry["args"][-2:] == ["--config", str(config.resolve())]
        else:
            assert entry["url"] == hub.mcp_url.replace(f":{hub.port}", f":{hub.port}")
            assert "Bearer ${" in entry["headers"]["Authorization"]
        assert TOKEN not in target.read_text()


def test_the_hint_names_the_script_by_its_path_when_path_does_not_find_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    script = os.path.join(hub_bin_dir(), "mcp-hub")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    shown = shell_command()
    assert shown in (os.path.relpath(script), script)
    assert os.path.samefile(ROOT / shown if not os.path.isabs(shown) else shown, script)
    monkeypatch.setenv("PATH", f"{hub_bin_dir()}:/usr/bin:/bin")
    assert shell_command() == "mcp-hub"


@pytest.mark.parametrize(("client", "reference"), [
    ("claude-code", "${MY_HUB_TOKEN}"), ("cursor", "${env:MY_HUB_TOKEN}"),
    ("vscode", "${env:MY_HUB_TOKEN}")])
def test_a_snippet_for_a_running_hub_sends_a_token_from_the_environment(
        client: str, reference: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_HUB_TOKEN", TOKEN)
    assert main(["config", "snippet", client, "--url", "http://127.0.0.1:1/mcp",
                 "--token-env", "MY_HUB_TOKEN"]) == 0
    out = capsys.readouterr().out
    entry = next(iter(next(iter(json.loads(out).values())).values()))
    assert entry["headers"] == {"Authorization": f"Bearer {reference}"}
    assert TOKEN not in out


def test_token_env_mistakes_are_one_line_errors(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["config", "snippet", "cursor", "--token-env", "X"], "goes with --url"),
        (["config", "snippet", "cursor", "--url", "http://h/mcp", "--token-env", "abc def"],
         "name of an environment variable"),
        (["config", "snippet", "claude-desktop", "--url", "http://h/mcp"], "mcp-remote"),
    ]
    for argv, message in cases:
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err


def test_the_readme_command_table_names_every_command() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`mcp-hub ([a-z]+)", table))
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    assert commands <= listed, sorted(commands - listed)
