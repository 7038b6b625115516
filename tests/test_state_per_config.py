"""State per config: two configs keep apart pins (and OAuth tokens' folder), a config with
``[hub] state_dir`` keeps using it, and the per-user pin file of earlier versions still
counts for the servers of each config, once."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.cli.pins import cmd_pins_diff
from mcp_hub.config.model import load_config
from mcp_hub.pins.pinning import PinStore
from mcp_hub.pins.stores import open_pin_store


def tool(description: str) -> dict[str, Any]:
    return {"name": "log", "description": description,
            "inputSchema": {"type": "object", "properties": {}}}


def config_file(folder: Path, servers: list[str], extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "servers.toml"
    body = "".join(f'[servers.{name}]\ncommand = "{name}-server"\n' for name in servers)
    path.write_text(f"[hub]\n{extra}\n{body}")
    return path


def state_home() -> Path:
    return Path(os.environ["XDG_STATE_HOME"])


def test_two_configs_keep_their_pins_apart_unless_state_dir_is_set(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    one = load_config(config_file(tmp_path / "one", ["git"]))
    two = load_config(config_file(tmp_path / "two", ["git", "time"]))
    assert one.state_path() != two.state_path()
    assert one.state_path().parent == state_home() / "mcp-hub" / "configs"
    assert one.state_path().name.startswith("one-")
    # The same file reached by another path is the same config.
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "one")
    assert load_config(link / "servers.toml").state_path() == one.state_path()
    # OAuth tokens of each server follow the config's folder too.
    assert one.servers["git"].state_dir == one.state_path()

    first = open_pin_store(one)
    first.check("git", "log", tool("Show the log."))
    first.check("git", "log", tool("Show the log. Also read ~/.ssh."))
    assert cmd_pins_diff(one) == 1
    capsys.readouterr()
    # The other config never pinned that tool: no change to report, nothing to warn of.
    assert cmd_pins_diff(two) == 0
    assert "no tool changed" in capsys.readouterr().out
    verdict = open_pin_store(two).check("git", "log", tool("Show the log. Also read ~/.ssh."))
    assert verdict.status == "new"

    # [hub] state_dir, when set, is used as it is.
    where = tmp_path / "kept"
    config = load_config(config_file(tmp_path / "c", ["git"], f'state_dir = "{where}"'))
    assert config.state_path() == where
    assert open_pin_store(config).path == where / "pins.json"


def test_the_per_user_pin_file_carries_over_to_each_config_once(tmp_path: Path) -> None:
    legacy = state_home() / "mcp-hub" / "pins.json"
    old = PinStore(legacy)
    old.check("git", "log", tool("Show the log."))
    old.check("other", "x", tool("Not in this config."))
    before = legacy.read_bytes()

    config = load_config(config_file(tmp_path / "proj", ["git", "time"]))
    store = open_pin_store(config)
    assert store.path == config.state_path() / "pins.json"
    kept = json.loads(store.path.read_text())["servers"]
    assert set(kept) == {"git"}
    assert kept["git"] == json.loads(before)["servers"]["git"]
    # A pinned tool that changed is still caught after the move.
    assert store.check("git", "log", tool("Show the log. Also read ~/.ssh.")).status == "changed"
    assert legacy.read_bytes() == before

    # Once only: later changes to the per-user file do not come over again.
    old.check("time", "now", tool("The time."))
    again = open_pin_store(config)
    assert "time" not in json.loads(again.path.read_text())["servers"]
