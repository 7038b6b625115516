"""``mcp-hub check`` finds mistakes in tool rewrites; ``mcp-hub tools --json`` shows them applied.

Both run the real CLI against the real SDK upstream (tests/fixtures_upstream/tracker_server.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.hubtest import PY, ROOT, hub_env, write_config
from tests.rewrite_support import PROFILE, REWRITES, TRACKER

MISTAKES = """
[servers.tracker.tools.create_isue]
description = "typo in the tool's name"

[servers.tracker.tools.list_issues]
name = "received"

[servers.tracker.tools.create_issue.arguments.titel]
description = "typo in the argument's name"

[servers.tracker.tools.create_issue.arguments.repo]
hide = true

[servers.tracker.tools.create_issue.arguments.title]
rename = "body"

[profiles.support.tools.tracker_new_isue]
description = "typo in the exposed name"
"""

pytestmark = pytest.mark.anyio


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "mcp_hub", *args], cwd=str(ROOT), env=hub_env(),
                          capture_output=True, text=True, timeout=120, check=False)


async def test_check_reports_each_kind_of_rewrite_mistake_with_did_you_mean(tmp_path: Path
                                                                         ) -> None:
    path = write_config(tmp_path, TRACKER + MISTAKES
                        + '\n[servers.tracker.tools.create_issue]\nname = "new_issue"\n')
    done = await anyio.to_thread.run_sync(lambda: run_cli("check", "--config", str(path)))
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    lines = [line for line in out.splitlines() if line.startswith("rewrite: ")]
    assert any("servers.tracker.tools.create_isue" in l_ and "did you mean 'create_issue'" in l_
               for l_ in lines), out
    assert any("arguments.titel" in l_ and "did you mean 'title'" in l_ for l_ in lines), out
    assert any("'tracker_received' is taken by more than one tool" in l_
               and "tracker/list_issues" in l_ and "tracker/received" in l_ for l_ in lines), out
    assert any("arguments.repo" in l_ and "set 'fixed' or 'default'" in l_ for l_ in lines), out
    assert any("arguments.title" in l_ and "clashes with the argument 'body'" in l_
               for l_ in lines), out
    assert any("profiles.support.tools.tracker_new_isue" in l_
               and "did you mean 'tracker_new_issue'" in l_ for l_ in lines), out
    assert len(lines) == 6, out


async def test_check_passes_a_config_whose_rewrites_are_right(tmp_path: Path) -> None:
    path = write_config(tmp_path, TRACKER + REWRITES)
    done = await anyio.to_thread.run_sync(lambda: run_cli("check", "--config", str(path)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rewrite:" not in done.stdout


async def test_tools_json_shows_the_upstream_name_and_the_rewrites_applied(tmp_path: Path
                                                                           ) -> None:
    secret = "acme-secret-owner-7f3a"
    path = write_config(tmp_path, TRACKER + REWRITES.replace('fixed = "acme"',
                                                             'fixed = "${TRACKER_OWNER}"')
                        + PROFILE)
    env = {**hub_env(), "TRACKER_OWNER": secret}
    done = await anyio.to_thread.run_sync(lambda: subprocess.run(
        [PY, "-m", "mcp_hub", "tools", "--json", "--profile", "support", "--config", str(path)],
        cwd=str(ROOT), env=env,
        capture_output=True, text=True, timeout=120, check=False))
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout
    rows = {r["name"]: r for r in json.loads(done.stdout)["tools"]}
    issue = rows["tracker_new_issue"]
    assert issue["upstream_name"] == "create_issue"
    assert issue["rewrites"]["name"] == "new_issue"
    assert issue["rewrites"]["arguments"]["owner"] == {"fixed": "[REDACTED]"}
    assert issue["rewrites"]["arguments"]["title"] == {"rename": "summary",
                                                       "description": "One line, imperative."}
    assert issue["profile_rewrites"]["name"] == "report_issue"
    assert issue["profile_rewrites"]["arguments"]["labels"] == {"fixed": ["customer"]}
    assert rows["tracker_received"]["upstream_name"] == "received"
    assert rows["tracker_received"]["rewrites"] == {}
    assert "tracker_list_issues" not in rows
