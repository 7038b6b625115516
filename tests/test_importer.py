"""``mcp-hub import``: client JSON configs → servers.toml the hub accepts.

The fixtures in ``tests/fixtures_import/`` are shaped like the files the three
clients write (Claude Desktop's ``claude_desktop_config.json``, a project's
``.cursor/mcp.json``, a project's ``.vscode/mcp.json`` with comments and inputs).
Every output is parsed twice: by ``tomllib`` and by the hub's own
``parse_config`` with the environment the output says it needs.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_hub.clients.importer import default_config_paths, import_client_config
from mcp_hub.config.model import HubConfig, parse_config
from mcp_hub.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures_import"
CLAUDE = FIXTURES / "claude_desktop_config.json"
CURSOR = FIXTURES / "cursor-project" / ".cursor" / "mcp.json"
VSCODE = FIXTURES / "vscode-project" / ".vscode" / "mcp.json"

# Every literal secret in the fixtures: none may reach the TOML.
SECRETS = [
    "ghp_EXAMPLEexample0123456789EXAMPLEexam",
    "BSAexampleexampleexample0123",
    "s3cretPassw0rd",
    "ctx7sk-example-0123456789abcdef",
    "sk-exampleEXAMPLE0123456789abcd",
    "9f8e7d6c5b4a39281706f5e4d3c2b1a0",
]

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")


def load(text: str) -> tuple[dict[str, Any], HubConfig]:
    """Parse the output as plain TOML and as the hub's config (needed vars set)."""
    raw = tomllib.loads(text)
    env = {m.group(1): f"value-of-{m.group(1)}" for m in _REF.finditer(text)}
    return raw, parse_config(text, environ=env)


def run(client: Any, path: Path, **kw: Any) -> tuple[str, list[str], dict[str, Any], HubConfig]:
    text, warnings = import_client_config(client, path, **kw)
    for secret in SECRETS:
        assert secret not in text, f"literal secret copied into the TOML: {secret[:6]}…"
    assert not any("unknown variable" in w for w in warnings), warnings
    raw, config = load(text)
    return text, warnings, raw, config


def warned(warnings: list[str], *fragments: str) -> bool:
    return any(all(f in w for f in fragments) for w in warnings)


# --------------------------------------------------------------------------- Claude Desktop


def test_claude_desktop_stdio_servers_env_and_secrets() -> None:
    text, warnings, raw, config = run("claude-desktop", CLAUDE)
    servers = raw["servers"]
    assert list(servers) == ["filesystem", "github", "brave_search", "time", "postgres", "sqlite"]
    fs = config.servers["filesystem"]
    assert fs.transport == "stdio" and fs.command == "npx"
    assert fs.args == ["-y", "@modelcontextprotocol/server-filesystem", "/Users/alex/Desktop",
                       "/Users/alex/Downloads"]
    # Literal secrets become references to variables of the same name …
    assert servers["github"]["env"] == {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_PERSONAL_ACCESS_TOKEN}"}
    assert warned(warnings, "github.env.GITHUB_PERSONAL_ACCESS_TOKEN", "literal secret")
    # … while ordinary settings are copied as they are.
    assert servers["brave_search"]["env"] == {"BRAVE_API_KEY": "${BRAVE_API_KEY}",
                                              "LOG_LEVEL": "info"}
    assert warned(warnings, "'brave search' imported as 'brave_search'")
    # Windows paths survive TOML escaping.
    assert config.servers["sqlite"].args[1] == "C:\\Users\\alex\\mcp\\sqlite"
    assert config.servers["time"].args == ["mcp-server-time", "--local-timezone=Europe/Paris"]
    # The header lists what the hub needs from its environment.
    assert "#   GITHUB_PERSONAL_ACCESS_TOKEN" in text


def test_claude_desktop_disabled_server_and_password_in_url() -> None:
    text, warnings, raw, config = run("claude-desktop", CLAUDE)
    pg = raw["servers"]["postgres"]
    assert pg["enabled"] is False
    assert "postgres" not in config.enabled_servers()
    assert warned(warnings, "postgres", "disabled")
    # A disabled server's references default to empty, so the file loads without them.
    assert pg["env"] == {"PGPASSWORD": "${PGPASSWORD:-}"}
    assert pg["args"][-1] == "postgresql://app:${POSTGRES_PASSWORD:-}@db.internal:5432/app"
    parse_config(text, environ={
        k: "x" for k in ("GITHUB_PERSONAL_ACCESS_TOKEN", "BRAVE_API_KEY")})


# --------------------------------------------------------------------------- Cursor


def test_cursor_remote_http_sse_headers_and_variables() -> None:
    _, warnings, raw, config = run("cursor", CURSOR)
    servers = raw["servers"]
    c7 = config.servers["context7"]
    assert (c7.transport, c7.url) == ("http", "https://mcp.context7.com/mcp")
    assert servers["context7"]["headers"] == {"CONTEXT7_API_KEY": "${CONTEXT7_API_KEY}"}
    # A URL ending in /sse with no type is the legacy SSE transport.
    assert config.servers["linear"].transport == "sse"
    # "type": "sse" is honoured whatever the URL looks like.
    remote = servers["remote-sse"]
    assert remote["transport"] == "sse"
    assert remote["headers"] == {"Authorization": "Bearer ${REMOTE_SSE_TOKEN}"}
    assert warned(warnings, "remote-sse.headers.Authorization", "REMOTE_SSE_TOKEN")
    # ${env:X} becomes the hub's ${X}; JSON-in-a-string values are kept intact.
    notion = servers["notion"]["env"]
    assert notion["NOTION_TOKEN"] == "${NOTION_TOKEN}"
    assert json.loads(notion["OPENAPI_MCP_HEADERS"]) == {"Notion-Version": "2022-06-28"}
    # ${workspaceFolder} is the project holding .cursor/, ${userHome} the home directory.
    project = str((FIXTURES / "cursor-project").resolve())
    args = config.servers["project-scripts"].args
    assert args[0] == f"{project}/tools/mcp_server.py"
    assert args[2] == f"{Path.home()}/.config/tools.json"
    assert warned(warnings, "project-scripts", "envFile")
    # Disabled, with the client-only autoApprove dropped and named.
    assert servers["playwright"]["enabled"] is False
    assert warned(warnings, "playwright", "autoApprove")


# --------------------------------------------------------------------------- VS Code


def test_vscode_servers_inputs_types_and_comments() -> None:
    _, warnings, raw, config = run("vscode", VSCODE)
    servers = raw["servers"]
    assert set(servers) == {"github", "perplexity", "fetch", "legacy-events", "local.dev_server"}
    gh = config.servers["github"]
    assert (gh.transport, gh.url) == ("http", "https://api.githubcopilot.com/mcp/")
    # ${input:github-token} → ${GITHUB_TOKEN}, with a warning naming the input.
    assert servers["github"]["headers"] == {"Authorization": "Bearer ${GITHUB_TOKEN}"}
    assert warned(warnings, "${input:github-token}", "GITHUB_TOKEN", "GitHub Personal Access")
    assert servers["perplexity"]["env"] == {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"}
    assert config.servers["perplexity"].transport == "stdio"
    assert servers["fetch"]["enabled"] is False
    sse = config.servers["legacy-events"]
    assert (sse.transport, sse.url) == ("sse", "http://localhost:3001/sse")
    # A name with a space is sanitised; a dot is allowed (and quoted as a TOML key).
    dev = config.servers["local.dev_server"]
    project = str((FIXTURES / "vscode-project").resolve())
    assert dev.cwd == project and dev.args == [f"{project}/build/index.js"]
    assert servers["local.dev_server"]["env"] == {"DEBUG": "mcp:*", "API_SECRET": "${API_SECRET}"}
    assert warned(warnings, "local.dev server", "dev")
    assert warned(warnings, "local.dev server", "envFile")


def test_vscode_settings_json_with_mcp_key(tmp_path: Path) -> None:
    settings_file = tmp_path / "settings.json"
    settings_file.write_text("""{
      "editor.fontSize": 14, // user settings carry other keys
      "mcp": {
        "servers": {
          "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"],},
        },
      },
    }""")
    _, _, raw, _ = run("vscode", settings_file)
    assert raw["servers"]["time"] == {"command": "uvx", "args": ["mcp-server-time"]}


# --------------------------------------------------------------------------- edge cases


def test_hub_style_references_are_kept_and_unknown_ones_converted(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": {
        "A": "${HOME_DIR:-/home/u}", "B": "${MY_TOKEN}", "C": "${workspace Folder}"}}}}))
    text, warnings = import_client_config("claude-desktop", cfg)
    env = tomllib.loads(text)["servers"]["s"]["env"]
    assert env == {"A": "${HOME_DIR:-/home/u}", "B": "${MY_TOKEN}", "C": "${WORKSPACE_FOLDER}"}
    assert warned(warnings, "unknown variable ${workspace Folder}")
    parse_config(text, environ={"MY_TOKEN": "t", "WORKSPACE_FOLDER": "/w"})


def test_names_are_sanitised_unique_and_avoid_existing(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "My Server": {"command": "a"},
        "My/Server": {"command": "b"},
        "-weird name!": {"command": "c"},
        "time": {"command": "d"},
        "x" * 80: {"command": "e"},
    }}))
    _, warnings, raw, _ = run("claude-desktop", cfg, existing_names=["time"])
    names = list(raw["servers"])
    assert names[:3] == ["My_Server", "My_Server-2", "weird_name_"]
    assert len(names[3]) == 64 and len(names) == 4
    assert warned(warnings, "time: already in servers.toml as 'time'")


def test_entries_without_command_or_url_are_skipped(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "ok": {"command": "x"}, "empty": {}, "bad": "not an object",
        "both": {"command": "y", "url": "http://h/mcp"},
    }}))
    _, warnings, raw, _ = run("cursor", cfg)
    assert set(raw["servers"]) == {"ok", "both"}
    assert raw["servers"]["both"] == {"command": "y"}
    assert warned(warnings, "empty", "skipped") and warned(warnings, "bad", "skipped")
    assert warned(warnings, "both", "kept the command")


def test_env_of_a_remote_and_headers_of_a_stdio_server_are_left_out(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "local": {"command": "x", "env": {"DEBUG": "1", "API_TOKEN": "tok-0123456789abcdef"},
                  "headers": {"X-Team": "a"}},
        "remote": {"url": "http://h/mcp", "headers": {"X-Team": "a", "X-Api-Key": "k-value"},
                   "env": {"DEBUG": "1"}},
    }}))
    text, warnings, raw, _ = run("cursor", cfg)
    assert raw["servers"]["local"]["env"] == {"DEBUG": "1", "API_TOKEN": "${API_TOKEN}"}
    assert "headers" not in raw["servers"]["local"]
    assert raw["servers"]["remote"]["headers"] == {"X-Team": "a",
                                                   "X-Api-Key": "${REMOTE_X_API_KEY}"}
    assert "env" not in raw["servers"]["remote"]
    assert "tok-0123456789abcdef" not in text and "k-value" not in text
    assert warned(warnings, "local: 'headers' has no meaning for a stdio server; ignored")
    assert warned(warnings, "remote: 'env' has no meaning for a remote server; ignored")


def test_secret_flags_and_query_parameters(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "cli": {"command": "tool", "args": ["--api-key", "abcd1234efgh5678", "--token=zyx98765",
                                             "--verbose", "--name", "plain"]},
        "remote": {"url": "https://h.example/mcp?api_key=QWERTYUIOP123456&region=eu"},
    }}))
    text, warnings, raw, config = run("cursor", cfg)
    assert "abcd1234efgh5678" not in text and "zyx98765" not in text
    assert "QWERTYUIOP123456" not in text
    assert raw["servers"]["cli"]["args"] == ["--api-key", "${CLI_API_KEY}",
                                             "--token=${CLI_TOKEN}", "--verbose", "--name",
                                             "plain"]
    assert config.servers["remote"].url == (
        "https://h.example/mcp?api_key=value-of-REMOTE_API_KEY&region=eu")
    assert raw["servers"]["remote"]["url"].endswith("api_key=${REMOTE_API_KEY}&region=eu")
    assert len(warnings) == 3


def test_two_different_secrets_under_one_name_get_two_variables(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {
        "a": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaa"}},
        "b": {"command": "y", "env": {"GITHUB_TOKEN": "ghp_bbbbbbbbbbbbbbbbbbbbbbbbbbbb"}},
        "c": {"command": "z", "env": {"GITHUB_TOKEN": "ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaa"}},
    }}))
    _, _, raw, _ = run("claude-desktop", cfg)
    refs = [raw["servers"][n]["env"]["GITHUB_TOKEN"] for n in "abc"]
    assert refs == ["${GITHUB_TOKEN}", "${GITHUB_TOKEN_2}", "${GITHUB_TOKEN}"]


def test_non_secret_values_under_secret_names_are_kept(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"mcpServers": {"s": {"command": "x", "env": {
        "USE_AUTH": "true", "TOKEN_LIMIT": "4096", "KEY_FILE": "/etc/keys/k.pem",
        "AUTH_URL": "https://login.example.com/oauth", "GREETING": "hello world",
    }}}}))
    _, warnings, raw, _ = run("claude-desktop", cfg)
    assert raw["servers"]["s"]["env"]["KEY_FILE"] == "/etc/keys/k.pem"
    assert raw["servers"]["s"]["env"]["TOKEN_LIMIT"] == "4096"
    assert warnings == []


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        import_client_config("cursor", tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    with pytest.raises(ConfigError, match=r"bad\.json: invalid JSON at line 1"):
        import_client_config("cursor", bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"servers": {"a": {"command": "x"}}, "inputs": []}))
    # A VS Code file read as Claude Desktop still imports (the keys are unambiguous) …
    text, _ = import_client_config("claude-desktop", wrong)
    assert "[servers.a]" in text
    # … but a file with neither key is refused with a hint.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"editor.fontSize": 12}))
    with pytest.raises(ConfigError, match="is this a vscode MCP configuration"):
        import_client_config("vscode", other)


def test_empty_server_table_gives_valid_toml(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text('{"mcpServers": {}}')
    text, warnings = import_client_config("claude-desktop", cfg)
    assert tomllib.loads(text) == {} and warnings == []
    assert parse_config(text).servers == {}


# --------------------------------------------------------------------------- default paths


@pytest.mark.parametrize(("platform", "env", "expected"), [
    ("linux", {}, "/home/u/.config/Claude/claude_desktop_config.json"),
    ("linux", {"XDG_CONFIG_HOME": "/xdg"}, "/xdg/Claude/claude_desktop_config.json"),
    ("darwin", {}, "/home/u/Library/Application Support/Claude/claude_desktop_config.json"),
    ("win32", {"APPDATA": "/appdata"}, "/appdata/Claude/claude_desktop_config.json"),
])
def test_claude_desktop_default_path_per_os(platform: str, env: dict[str, str],
                                            expected: str) -> None:
    paths = default_config_paths("claude-desktop", platform=platform, home=Path("/home/u"),
                                 environ=env)
    assert [str(p) for p in paths] == [expected]


def test_cursor_and_vscode_default_paths() -> None:
    home, cwd = Path("/home/u"), Path("/proj")
    assert [str(p) for p in default_config_paths("cursor", home=home, cwd=cwd)] == [
        "/proj/.cursor/mcp.json", "/home/u/.cursor/mcp.json"]
    assert [str(p) for p in default_config_paths(
        "vscode", platform="linux", home=home, cwd=cwd, environ={})] == [
        "/proj/.vscode/mcp.json", "/home/u/.config/Code/User/mcp.json"]
    assert [str(p) for p in default_config_paths(
        "vscode", platform="darwin", home=home, cwd=cwd, environ={})][1] == (
        "/home/u/Library/Application Support/Code/User/mcp.json")


def test_default_path_lookup_prefers_the_project_and_mentions_the_other(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    (project / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"global": {"command": "g"}}}')
    with pytest.raises(ConfigError, match="no cursor MCP configuration found"):
        import_client_config("cursor", None, home=tmp_path / "nowhere", cwd=project)
    text, warnings = import_client_config("cursor", None, home=home, cwd=project)
    assert "[servers.global]" in text and warnings == []
    (project / ".cursor" / "mcp.json").write_text('{"mcpServers": {"local": {"command": "l"}}}')
    text, warnings = import_client_config("cursor", None, home=home, cwd=project)
    assert "[servers.local]" in text and "[servers.global]" not in text
    assert warned(warnings, "also found", str(home / ".cursor" / "mcp.json"))


# --------------------------------------------------------------------------- TOML escaping


_plain = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="$=@-:"),
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(name=st.text(min_size=1, max_size=30), args=st.lists(_plain, max_size=5),
       env=st.dictionaries(st.text(alphabet="ABCDEFGHIJ_", min_size=1, max_size=6).filter(
           lambda k: "KEY" not in k), _plain, max_size=3))
def test_any_strings_round_trip_through_the_toml(name: str, args: list[str],
                                                 env: dict[str, str]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "c.json"
        cfg.write_text(json.dumps({"mcpServers": {name: {"command": "cmd", "args": args,
                                                         "env": env}}}))
        text, _ = import_client_config("claude-desktop", cfg)
    raw = tomllib.loads(text)
    (server,) = raw["servers"].values()
    assert server.get("args", []) == args
    assert server.get("env", {}) == env
    parse_config(text)


# --------------------------------------------------------------------------- the command


def _cli_has_import() -> bool:
    import argparse

    from mcp_hub.cli.main import build_parser

    sub = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return any("import" in a.choices for a in sub)


@pytest.mark.skipif(not _cli_has_import(), reason="`mcp-hub import` is not wired into the CLI")
def test_import_command_prints_and_appends(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "mcp_hub", "import"]
    out = subprocess.run([*cmd, "vscode", str(VSCODE)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "GITHUB_TOKEN" in out.stderr and "warning" in out.stderr
    load(out.stdout)
    target = tmp_path / "servers.toml"
    target.write_text('[servers.github]\ncommand = "gh-mcp"\n')
    out = subprocess.run([*cmd, "vscode", str(VSCODE), "-o", str(target)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    _, config = load(target.read_text())
    assert config.servers["github"].command == "gh-mcp"  # already there: left alone
    assert "github-2" not in config.servers
    assert "already in servers.toml as 'github'" in out.stderr
    out = subprocess.run([*cmd, "vscode", str(VSCODE), "-o", str(target), "--update"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    _, config = load(target.read_text())
    assert config.servers["github"].url == "https://api.githubcopilot.com/mcp/"
    missing = subprocess.run([*cmd, "cursor", str(tmp_path / "nope.json")], capture_output=True,
                             text=True, env=env, cwd=tmp_path, timeout=60)
    assert missing.returncode == 2 and "no such file" in missing.stderr
