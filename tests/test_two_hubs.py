"""Two Hubs in one process do not see each other's tools, toolsets or subscribers."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.hub.core import Hub
from mcp_hub.registry.toolsets import TOOLSETS

pytestmark = pytest.mark.anyio

CONFIG_A = """
[toolsets.team]
tools = ["only_a"]

[profiles.team]
toolsets = ["team"]
"""


async def handler(args: dict[str, Any], **_: Any) -> str:
    return "ok"


def schema(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"{name}.", "inputSchema": {"type": "object"}}


async def test_two_hubs_in_one_process_are_separate() -> None:
    config_a = parse_config(CONFIG_A)
    config_b = parse_config("")
    async with Hub(config_a, load_builtins=False, load_plugin_modules=False) as a, \
            Hub(config_b, load_builtins=False, load_plugin_modules=False) as b:
        a.registry.register("only_a", "plugin-a", schema("only_a"), handler, origin="plugin")
        b.registry.register("only_b", "plugin-b", schema("only_b"), handler, origin="plugin")
        assert [t.name for t in a.list_tools()] == ["only_a"]
        assert [t.name for t in b.list_tools()] == ["only_b"]
        # A's composite toolset lives in A alone: not in B, not in the process-wide table.
        assert "team" in a.toolsets.snapshot()
        assert "team" not in b.toolsets.snapshot()
        assert "team" not in TOOLSETS
        assert [t.name for t in a.list_tools("team")] == ["only_a"]
        # Each hub keeps its own subscribers and sessions.
        a.upstream_serving.subscribers["x://1"] = [object()]
        assert b.upstream_serving.subscribers == {}
        assert a.sessions is not b.sessions
    assert "team" not in TOOLSETS


FILE_ROOTS = """
[builtins.file]
roots = ["{root}"]
"""


async def test_each_hub_has_its_own_builtins_and_runtime_config(tmp_path: Any) -> None:
    from mcp_hub.registry.tool_registry import registry as declared

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "note.txt").write_text("from a")
    config_a = parse_config(FILE_ROOTS.format(root=tmp_path / "a"))
    config_b = parse_config("")  # no file roots: the file tools are hidden
    async with Hub(config_a, load_plugin_modules=False) as a, \
            Hub(config_b, load_plugin_modules=False) as b:
        assert a.runtime is not b.runtime and a.runtime.config is config_a
        # Each hub registered its own entries; the declaration table serves neither.
        entry_a, entry_b = a.registry.get_entry("read_file"), b.registry.get_entry("read_file")
        assert entry_a is not None and entry_b is not None and entry_a is not entry_b
        assert declared.get_entry("read_file") not in (entry_a, entry_b)
        a.registry.deregister("hub_status")
        assert b.registry.get_entry("hub_status") is not None
        # A builtin's check_fn and handler read the config of the hub that runs it.
        names_a = {t.name for t in a.list_tools()}
        names_b = {t.name for t in b.list_tools()}
        assert "read_file" in names_a and "read_file" not in names_b
        result = await a.call_tool("read_file", {"path": str(tmp_path / "a" / "note.txt")})
        assert not result.is_error and "from a" in str(result.content)


SECRET_CONFIG = """
[servers.api]
url = "http://127.0.0.1:9/mcp"
enabled = false
headers = {{ "X-Key" = "${{API_KEY}}" }}
"""


async def test_each_hub_keeps_its_own_secrets_and_drops_them_when_closed() -> None:
    from mcp_hub.redact import known_secrets, redact

    secret_a, secret_b = "alpha-value-0001", "bravo-value-0002"
    config_a = parse_config(SECRET_CONFIG.format(), environ={"API_KEY": secret_a})
    config_b = parse_config(SECRET_CONFIG.format(), environ={"API_KEY": secret_b})
    async with Hub(config_a, load_builtins=False, load_plugin_modules=False) as a:
        async with Hub(config_b, load_builtins=False, load_plugin_modules=False) as b:
            assert secret_a in a.secrets.values and secret_a not in b.secrets.values
            assert secret_b in b.secrets.values and secret_b not in a.secrets.values
            # Logs and errors (process-wide) hide the secrets of every open hub.
            assert redact(f"{secret_a} {secret_b}") == "[REDACTED] [REDACTED]"
        assert secret_b not in known_secrets() and redact(secret_b) == secret_b
        assert redact(secret_a) == "[REDACTED]"
    assert secret_a not in known_secrets()


async def test_processes_started_early_belong_to_the_first_hub_alone(tmp_path: Any) -> None:
    import sys

    from mcp_hub.upstream.stdio import prespawn

    path = tmp_path / "servers.toml"
    path.write_text(f'[servers.idle]\ncommand = "{sys.executable}"\n'
                    'args = ["-c", "import sys; sys.stdin.read()"]\n')
    assert prespawn.start(path) == 1
    try:
        async with Hub(parse_config(""), load_builtins=False, load_plugin_modules=False) as a:
            popen = a.early.started()["idle"].popen
            async with Hub(parse_config(""), load_builtins=False, load_plugin_modules=False) as b:
                assert b.early.started() == {}
            assert list(a.early.started()) == ["idle"]  # B closing left A's alone
        # A closed: what it never adopted is stopped.
        assert a.early.started() == {} and popen.poll() is not None
    finally:
        prespawn.discard_all()
