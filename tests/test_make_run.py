"""``make run`` installs the runtime only (the ``servers`` extra, npm's dependencies
without the devDependencies) and serves with the PATH it was started with, so the
bundled Node and the venv never shadow the machine's tools for servers a user adds;
``make setup`` (and ``make test``) still install everything. Read from ``make -n``:
nothing is installed or started."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.hubtest import ROOT

USER_PATH = "/opt/user-tools/bin:/usr/local/bin:/usr/bin:/bin"


def dry_run(target: str) -> list[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("needs make")
    env = {**os.environ, "PATH": f"{USER_PATH}:{os.path.dirname(make)}"}
    done = subprocess.run([make, "-n", "-B", target], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_make_run_installs_the_runtime_only_and_serves_with_the_users_path() -> None:
    lines = dry_run("run")
    pip = [line for line in lines if "pip install" in line and "-e " in line]
    assert pip and all("'.[servers]'" in line for line in pip), pip
    npm = [line for line in lines if "npm install" in line]
    assert npm and all("--omit=dev" in line for line in npm), npm
    assert any(line.startswith("echo \"==> ") for line in lines)
    serve = next(line for line in lines if "mcp-hub serve" in line)
    assert serve.startswith(f"env PATH='{USER_PATH}:"), serve
    assert "node_modules" not in serve and ".venv/bin:" not in serve.split()[1]

    # The shipped Node server is npm's only dependency; the test clients and Node are dev.
    package = json.loads((ROOT / "js" / "package.json").read_text())
    assert list(package["dependencies"]) == ["@modelcontextprotocol/server-everything"]
    assert {"node", "@modelcontextprotocol/inspector", "oauth2-mock-server"} <= set(
        package["devDependencies"])


def test_make_setup_still_installs_everything() -> None:
    lines = dry_run("setup")
    assert any("pip install" in line and "'.[servers,dev]'" in line for line in lines), lines
    assert any("npm install" in line and "--omit" not in line for line in lines), lines
