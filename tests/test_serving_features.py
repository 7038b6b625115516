"""Profiles, log relaying, prompts/resources routing and the CLI helpers, end to end."""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from mcp_hub.cli.main import main, snippet
from tests.fixtures_upstream import FIXTURES
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, http_session, hub_env, stdio_hub, write_config

pytestmark = pytest.mark.anyio


def _two_echo_config(tmp_path: Path) -> Path:
    profiles = """
[profiles.alpha]
toolsets = ["mcp-alpha", "hub"]

[profiles.nohub]
toolsets = ["all"]
disabled_toolsets = ["hub", "clarify", "mcp-beta"]
"""
    return write_config(tmp_path, echo_server_toml("alpha") + echo_server_toml("beta") + profiles)


async def test_a_profile_endpoint_exposes_only_its_toolsets(tmp_path: Path) -> None:
    config = _two_echo_config(tmp_path)
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub:
            async with http_session(hub.mcp_url) as everything:
                names = {t.name for t in (await everything.list_tools()).tools}
                assert {"alpha_echo", "beta_echo", "hub_status"} <= names
            async with http_session(f"{hub.base}/p/alpha/mcp") as alpha:
                names = {t.name for t in (await alpha.list_tools()).tools}
                assert "alpha_echo" in names and "hub_status" in names
                assert not any(n.startswith("beta_") for n in names)
                with pytest.raises(MCPError):
                    await alpha.call_tool("beta_echo", {"text": "x"})
                ok = await alpha.call_tool("alpha_echo", {"text": "x"})
                assert not ok.is_error
            async with http_session(f"{hub.base}/p/nohub/mcp") as nohub:
                names = {t.name for t in (await nohub.list_tools()).tools}
                assert "alpha_echo" in names
                assert "hub_status" not in names and "beta_echo" not in names


async def test_serve_profile_over_stdio_exposes_only_that_profile(tmp_path: Path) -> None:
    config = _two_echo_config(tmp_path)
    with anyio.fail_after(60):
        async with stdio_hub(config, "--profile", "alpha") as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert "alpha_add" in names and "beta_add" not in names


async def test_upstream_log_messages_reach_the_client_respecting_its_level(tmp_path: Path) -> None:
    received: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        received.append(params)

    config = write_config(tmp_path, echo_server_toml("echo"))
    with anyio.fail_after(60):
        async with stdio_hub(config, logging_callback=on_log) as session:
            with warnings.catch_warnings():
                # Deprecated for 2026-07-28 clients; handshake-era clients still use it.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await session.set_logging_level("warning")
            await session.call_tool("echo_log", {"message": "quiet please", "level": "info"})
            await session.call_tool("echo_log", {"message": "loud enough", "level": "error"})
            await session.send_ping()
    texts = [str(p.data) for p in received]
    assert any("loud enough" in t for t in texts), texts
    assert not any("quiet please" in t for t in texts), texts


async def test_prompts_and_resources_are_routed_to_their_upstream(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    with anyio.fail_after(60):
        async with stdio_hub(config) as session:
            prompts = {p.name for p in (await session.list_prompts()).prompts}
            assert "echo_greet" in prompts
            got = await session.get_prompt("echo_greet", {"name": "Ada"})
            assert "Ada" in json.dumps(got.model_dump(mode="json"))
            resources = {str(r.uri) for r in (await session.list_resources()).resources}
            assert "echo://hello" in resources
            read = await session.read_resource("echo://hello")
            assert read.contents[0].text == "hello"  # type: ignore[union-attr]
            templates = (await session.list_resource_templates()).resource_templates
            assert any(t.uri_template == "echo://item/{id}" for t in templates)
            with pytest.raises(MCPError):
                await session.read_resource("nowhere://nothing")


def test_config_snippets_register_the_hub_in_each_client(tmp_path: Path) -> None:
    cfg = str(tmp_path / "servers.toml")
    claude = snippet("claude-desktop", config_path=cfg, url=None, name="hub")
    entry = claude["mcpServers"]["hub"]
    assert entry["args"][:1] == ["serve"] and cfg in entry["args"]
    cursor = snippet("cursor", config_path=None, url="http://127.0.0.1:8765/mcp", name="hub")
    assert cursor == {"mcpServers": {"hub": {"url": "http://127.0.0.1:8765/mcp"}}}
    vscode = snippet("vscode", config_path=cfg, url=None, name="hub")
    assert vscode["servers"]["hub"]["type"] == "stdio"


def test_cli_prints_a_snippet_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "snippet", "vscode", "--url", "http://127.0.0.1:1/mcp"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["servers"]["mcp-hub"] == {"type": "http", "url": "http://127.0.0.1:1/mcp"}


def _cli(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "mcp_hub", *args], cwd=str(ROOT), env=hub_env(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_call_runs_one_tool_through_an_in_process_hub(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    proc = _cli("call", "echo_add", "--args", '{"a": 1, "b": "41"}', "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    assert result["structuredContent"] == {"sum": 42}
    bad = _cli("call", "echo_add", "--args", "not json", "--config", str(config))
    assert bad.returncode == 1 and "--args" in bad.stderr


def test_check_fails_when_an_enabled_server_cannot_start(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        echo_server_toml("echo") + '[servers.ghost]\ncommand = "no-such-command-anywhere"\n',
        hub="",
    )
    proc = _cli("check", "--config", str(config))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ghost" in proc.stdout and "echo" in proc.stdout
    assert "ready" in proc.stdout


def test_tools_json_lists_merged_tools_and_token_estimates(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"))
    proc = _cli("tools", "--json", "--tokens", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    names = {t["name"] for t in data["tools"]}
    assert "echo_echo" in names and "hub_status" in names
    assert data["tokens"]["all_tools"] > 0


def test_a_bad_config_names_the_key_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "servers.toml"
    path.write_text('[servers.x]\ncommand = "y"\nargz = ["a"]\n')
    proc = _cli("tools", "--config", str(path))
    assert proc.returncode == 2
    assert "servers.x.argz" in proc.stderr and "args" in proc.stderr


async def test_status_command_shows_a_running_http_hub(tmp_path: Path) -> None:
    token = "status-token-" + "x" * 20
    config = write_config(tmp_path, echo_server_toml("echo"),
                          hub=f'[hub.http]\nauth_tokens = ["{token}"]\n')
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub:
            text = await anyio.to_thread.run_sync(
                lambda: _cli("status", "--url", hub.mcp_url, "--token", token))
            assert text.returncode == 0, text.stderr
            assert "echo" in text.stdout and "ready" in text.stdout
            assert "tool_search: mode=auto" in text.stdout
            as_json = await anyio.to_thread.run_sync(
                lambda: _cli("status", "--url", hub.base, "--json", "--token", token))
            data = json.loads(as_json.stdout)
            assert data["upstreams"][0]["name"] == "echo"
            refused = await anyio.to_thread.run_sync(
                lambda: _cli("status", "--url", hub.base, "--token", "wrong-token-" + "y" * 20))
            assert refused.returncode == 1 and "401" in refused.stderr
            assert token not in text.stdout + text.stderr


async def test_a_profile_endpoint_advertises_only_what_its_upstreams_offer(tmp_path: Path) -> None:
    # echo has prompts and resources, tiny only tools: a profile of tiny alone offers neither.
    profiles = '\n[profiles.tools]\ntoolsets = ["mcp-tiny", "hub"]\n'
    tiny = f'[servers.tiny]\ncommand = "{PY}"\nargs = ["{FIXTURES / "tiny_server.py"}"]\n'
    config = write_config(tmp_path, echo_server_toml("echo") + tiny + profiles)
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub:
            async with http_session(hub.mcp_url) as everything:
                caps = everything.server_capabilities
                assert caps is not None
                assert caps.prompts is not None and caps.resources is not None
            async with http_session(f"{hub.base}/p/tools/mcp") as tools_only:
                caps = tools_only.server_capabilities
                assert caps is not None and caps.tools is not None
                assert caps.prompts is None and caps.resources is None
