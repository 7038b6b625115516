"""What a user chatting with a client can learn about missing tools: instructions, hub_status."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

import builtin_tools.hub_status  # noqa: F401 - registers the tool
from mcp_hub.config.model import load_config
from mcp_hub.downstream.instructions import BASE_INSTRUCTIONS
from mcp_hub.downstream.server import build_server
from mcp_hub.hub.core import Hub
from mcp_hub.hub.diagnosis import problem, summary
from mcp_hub.pipeline.context import CallContext
from tests.hubtest import PY, ROOT, echo_server_toml, hub_env, write_config

pytestmark = pytest.mark.anyio

MISSING = """
[servers.time]
command = "mcp-server-nowhere-to-be-found"

[servers.git]
command = "./bin/also-missing"
"""


def _up(name: str, state: str, error: str | None = None, tools: int = 0) -> dict[str, object]:
    return {"name": name, "state": state, "last_error": error, "tools": tools}


def test_the_summary_names_every_failing_server_and_why() -> None:
    source = Path("/etc/hub/servers.toml")
    ups = [_up("time", "parked", "command not found: mcp-server-time (not on PATH)"),
           _up("git", "reconnecting", "connection closed"), _up("off", "disabled")]
    line = summary(ups, source)
    assert "\n" not in line
    assert line.startswith("None of the 2 upstream MCP servers is connected")
    assert "time (parked: command not found: mcp-server-time" in line
    assert "git (reconnecting: connection closed)" in line
    assert str(source) in line
    partial = problem([_up("time", "ready", tools=2), ups[1]], source)
    assert partial is not None and partial.startswith("1 of 2 upstream MCP servers are not")
    assert problem([_up("time", "ready", tools=2)], source) is None
    assert summary([_up("time", "ready", tools=2)], source) == \
        "The upstream MCP server is connected (2 tools)."
    assert "No config file was found" in (problem([], None) or "")


def test_a_secret_in_an_error_is_not_repeated() -> None:
    from mcp_hub.redact import add_secrets

    add_secrets({"sekret-token-value-123"})
    line = summary([_up("api", "parked", "401 for sekret-token-value-123")], None)
    assert "sekret-token-value-123" not in line


async def test_hub_status_and_instructions_name_the_problem_in_process(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, MISSING))
    with anyio.fail_after(30):
        async with Hub(config, load_plugin_modules=False) as hub:
            await hub.wait_ready(20)
            result = await hub.call_tool("hub_status", {}, CallContext(tool_name="hub_status"))
            first = result.content[0]
            assert isinstance(first, TextContent)
            data = json.loads(first.text)
            assert next(iter(data)) == "summary"
            assert data["summary"].startswith("None of the 2 upstream MCP servers is connected")
            assert "command not found: mcp-server-nowhere-to-be-found" in data["summary"]
            # Over HTTP the SDK asks for the options when a session starts: they are current.
            options = build_server(hub).create_initialization_options()
            assert options.instructions is not None
            assert options.instructions.startswith(BASE_INSTRUCTIONS)
            assert "[hub] path" in options.instructions


async def test_all_is_well_keeps_the_plain_instructions(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path, echo_server_toml("echo")))
    with anyio.fail_after(30):
        async with Hub(config, load_plugin_modules=False) as hub:
            await hub.wait_ready(20)
            assert build_server(hub).create_initialization_options().instructions == \
                BASE_INSTRUCTIONS


async def test_over_stdio_the_first_initialize_already_names_the_problem(tmp_path: Path) -> None:
    # One server works, two are never found, one dies a second after it starts: the answer
    # to initialize must say so, although the client asks before that second has passed.
    crashy = (f'[servers.crashy]\ncommand = "{PY}"\n'
              'args = ["-c", "import sys, time; time.sleep(1.5); sys.exit(3)"]\n')
    config = write_config(tmp_path, echo_server_toml("echo") + MISSING + crashy)
    params = StdioServerParameters(command=PY, args=["-m", "mcp_hub", "serve", "--config",
                                                     str(config)], cwd=str(ROOT), env=hub_env())
    with anyio.fail_after(60):
        async with (stdio_client(params) as (read, write),
                    ClientSession(read, write) as session):
            init = await session.initialize()
            assert init.instructions is not None
            assert "3 of 4 upstream MCP servers are not connected" in init.instructions
            assert "crashy (reconnecting:" in init.instructions
            assert "time (parked: command not found: mcp-server-nowhere-to-be-found" \
                in init.instructions
            assert "git (parked: command not found:" in init.instructions
            assert "also-missing" in init.instructions
            tools = {t.name for t in (await session.list_tools()).tools}
            assert "echo_echo" in tools
