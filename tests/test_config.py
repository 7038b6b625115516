"""servers.toml: key-path errors, hints, interpolation and the search order."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_hub.config.model import ConfigError, HubConfig, find_config, load_config, parse_config

SERVER = '[servers.a]\ncommand = "run"\n'


def error_of(text: str, **kwargs: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def test_the_documented_example_parses() -> None:
    config = parse_config(
        """
        [hub]
        name = "mcp-hub"
        tool_name_separator = "_"
        max_tool_name_length = 64
        startup_timeout = 15

        [servers.time]
        command = "python"
        args = ["-m", "mcp_server_time"]
        env = { TZ = "UTC" }

        [servers.everything]
        command = "npx"
        args = ["-y", "@modelcontextprotocol/server-everything"]
        prefix = "ev"
        exclude = ["trigger-*"]

        [servers.remote]
        url = "http://127.0.0.1:3001/mcp"
        headers = { Authorization = "Bearer ${REMOTE_TOKEN}" }
        timeout = 60
        """,
        environ={"REMOTE_TOKEN": "tok-123456"},
    )
    assert list(config.servers) == ["time", "everything", "remote"]
    assert config.servers["time"].transport == "stdio"
    assert config.servers["remote"].transport == "http"
    assert config.servers["remote"].headers == {"Authorization": "Bearer tok-123456"}
    assert config.servers["remote"].timeout == 60
    assert config.servers["everything"].effective_prefix("everything") == "ev"
    assert config.servers["time"].effective_prefix("time") == "time"
    assert "tok-123456" in config.secret_values


def test_a_wrong_type_names_the_file_the_key_path_and_the_problem() -> None:
    text = '[servers.github]\ncommand = "gh"\nargs = "--stdio"\n'
    assert error_of(text, source=Path("conf/servers.toml")) == (
        "conf/servers.toml: servers.github.args: expected a list of strings")
    assert error_of('[servers.a]\ncommand = "x"\nargs = [1]\n') == (
        "servers.toml: servers.a.args.0: expected a string")
    assert "servers.a.timeout: Input should be greater than 0" in error_of(
        SERVER + "timeout = -1\n")


def test_a_misspelt_key_gets_a_close_match_hint() -> None:
    assert error_of('[servers.github]\ncomand = "gh"\n').startswith(
        "servers.toml: servers.github.comand: unknown key 'comand' (did you mean 'command'?)")
    assert error_of("[hub]\nstartup_timout = 3\n") == (
        "servers.toml: hub.startup_timout: unknown key 'startup_timout' "
        "(did you mean 'startup_timeout'?)")
    assert error_of('[serverz.a]\ncommand = "x"\n') == (
        "servers.toml: serverz: unknown key 'serverz' (did you mean 'servers'?)")
    assert error_of(SERVER + "zzz = 1\n") == "servers.toml: servers.a.zzz: unknown key 'zzz'"


def test_a_server_needs_exactly_one_way_to_reach_it() -> None:
    assert "needs 'command'" in error_of("[servers.a]\nenabled = true\n")
    assert "not both" in error_of('[servers.a]\ncommand = "x"\nurl = "http://h/mcp"\n')
    assert "must start with http:// or https://" in error_of('[servers.a]\nurl = "ftp://h"\n')
    sse = parse_config('[servers.a]\nurl = "http://h/sse"\ntransport = "sse"\n')
    assert sse.servers["a"].transport == "sse"


def test_server_names_are_checked() -> None:
    assert "server name 'bad name'" in error_of('[servers."bad name"]\ncommand = "x"\n')


def test_invalid_toml_is_reported_with_the_file() -> None:
    assert error_of("[servers.a\n", source=Path("x.toml")).startswith("x.toml: invalid TOML:")


def test_variables_are_interpolated_in_every_string_value() -> None:
    text = (
        "[hub]\nname = \"${HUB_NAME}\"\n"
        '[servers.a]\ncommand = "${CMD}"\nargs = ["--dir", "${HOME_DIR}/x", "${MISSING:-fallback}"]\n'
        'env = { TOKEN = "${TOKEN}" }\nheaders = {}\n'
    )
    env = {"HUB_NAME": "hub1", "CMD": "server", "HOME_DIR": "/home/u", "TOKEN": "s3cret-value"}
    config = parse_config(text, environ=env)
    server = config.servers["a"]
    assert config.hub.name == "hub1"
    assert server.command == "server"
    assert server.args == ["--dir", "/home/u/x", "fallback"]
    assert server.env == {"TOKEN": "s3cret-value"}
    assert "s3cret-value" in config.secret_values


def test_an_empty_default_and_an_escaped_dollar() -> None:
    config = parse_config(
        '[servers.a]\ncommand = "x"\nargs = ["${NOPE:-}", "$${LITERAL}", "a$b"]\n', environ={})
    assert config.servers["a"].args == ["", "${LITERAL}", "a$b"]


def test_an_unset_variable_without_default_names_the_server_and_the_key() -> None:
    config = parse_config(
        '[servers.github]\ncommand = "gh"\nenv = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }\n',
        environ={})
    assert config.servers["github"].unset_variable == (
        "env.GITHUB_TOKEN: environment variable GITHUB_TOKEN is not set "
        "(set it, or write ${GITHUB_TOKEN:-default})")
    hub_message = error_of('[hub]\nname = "${X}"\n', environ={})
    assert hub_message.startswith("servers.toml: hub.name: environment variable X is not set")


def test_search_order_explicit_then_env_then_cwd_then_user_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    cwd = tmp_path / "cwd"
    user_file = home / ".config" / "mcp-hub" / "servers.toml"
    user_file.parent.mkdir(parents=True)
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("MCP_HUB_CONFIG", raising=False)
    monkeypatch.chdir(cwd)

    assert find_config() is None
    assert load_config().servers == {}

    user_file.write_text('[servers.user]\ncommand = "x"\n')
    assert find_config() == user_file
    assert list(load_config().servers) == ["user"]

    (cwd / "servers.toml").write_text('[servers.local]\ncommand = "x"\n')
    assert list(load_config().servers) == ["local"]

    env_file = tmp_path / "env.toml"
    env_file.write_text('[servers.env]\ncommand = "x"\n')
    monkeypatch.setenv("MCP_HUB_CONFIG", str(env_file))
    assert list(load_config().servers) == ["env"]

    explicit = tmp_path / "explicit.toml"
    explicit.write_text('[servers.explicit]\ncommand = "x"\n')
    config = load_config(explicit)
    assert list(config.servers) == ["explicit"]
    assert config.source == explicit


def test_a_named_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.toml")


def test_enabled_servers_and_the_fingerprint() -> None:
    config = parse_config(SERVER + '[servers.b]\ncommand = "y"\nenabled = false\n')
    assert list(config.enabled_servers()) == ["a"]
    same = parse_config(SERVER + '[servers.b]\ncommand = "y"\nenabled = false\n')
    assert config.fingerprint() == same.fingerprint()
    assert HubConfig().fingerprint() != config.fingerprint()


@pytest.mark.parametrize(("server", "protocol"), [
    ('url = "http://127.0.0.1:9/mcp"', "auto"),
    ('url = "http://127.0.0.1:9/mcp"\ntransport = "http"', "auto"),
    ('url = "http://127.0.0.1:9/sse"\ntransport = "sse"', "2025"),
    ('command = "server"', "2025"),
    ('url = "http://127.0.0.1:9/mcp"\nprotocol = "2025"', "2025"),
    ('command = "server"\nprotocol = "auto"', "auto"),
    ('command = "server"\nprotocol = "2026"', "2026"),
])
def test_protocol_left_out_follows_the_transport(server: str, protocol: str) -> None:
    """Left out, the era is discovered over Streamable HTTP and the handshake elsewhere
    (stdio: one pipe, one session; SSE: a 2025 transport); set, it is kept as written."""
    config = parse_config(f"[servers.fx]\n{server}\n")
    assert config.servers["fx"].protocol == protocol
