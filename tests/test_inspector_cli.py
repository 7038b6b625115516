"""The official MCP Inspector's CLI mode lists and calls tools through the hub.

The inspector is a client no one here wrote (``@modelcontextprotocol/inspector``,
run on Node ≥ 22 from ``js/node_modules``); it talks to the hub over stdio (it
starts the hub itself) and over Streamable HTTP.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.hubtest import NODE_BIN, PY, ROOT, echo_server_toml, http_hub, hub_env, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.node]

NODE = NODE_BIN / "node"
INSPECTOR = NODE_BIN / "inspector"

if not INSPECTOR.exists() or not NODE.exists():
    pytest.skip("the Node packages are not installed (run `make setup`)", allow_module_level=True)


def _inspector(*args: str, timeout: float = 120) -> dict[str, object]:
    env = hub_env()
    env["MCP_CATALOG_PATH"] = str(Path(env.get("TMPDIR", "/tmp")) / f"inspector-{os.getpid()}.json")
    proc = subprocess.run(
        [str(NODE), str(INSPECTOR), "--cli", *args],
        cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"inspector failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    start = proc.stdout.index("{")
    result: dict[str, object] = json.loads(proc.stdout[start:])
    return result


def _hub_command(config: Path) -> list[str]:
    # The config travels in the environment: the inspector claims --config for itself.
    return ["-e", f"MCP_HUB_CONFIG={config}", "-e", f"PYTHONPATH={ROOT}",
            "--cwd", str(ROOT), PY, "-m", "mcp_hub", "serve"]


async def test_inspector_lists_and_calls_tools_through_the_hub_over_stdio(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    with anyio.fail_after(240):
        listed = await anyio.to_thread.run_sync(
            lambda: _inspector(*_hub_command(config), "--method", "tools/list"))
        names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined]
        assert {"echo_echo", "echo_add", "hub_status"} <= names
        called = await anyio.to_thread.run_sync(lambda: _inspector(
            *_hub_command(config), "--method", "tools/call", "--tool-name", "echo_echo",
            "--tool-arg", "text=from the inspector"))
        assert called["content"] == [{"type": "text", "text": "from the inspector"}]


async def test_inspector_lists_and_calls_tools_through_the_hub_over_http(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    with anyio.fail_after(240):
        async with http_hub(config, tmp_path) as hub:
            listed = await anyio.to_thread.run_sync(
                lambda: _inspector(hub.mcp_url, "--method", "tools/list"))
            names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined]
            assert {"echo_echo", "echo_add"} <= names
            called = await anyio.to_thread.run_sync(lambda: _inspector(
                hub.mcp_url, "--method", "tools/call", "--tool-name", "echo_add",
                "--tool-arg", "a=2", "b=3"))
            assert called.get("structuredContent") == {"sum": 5}
