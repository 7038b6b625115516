"""Redaction hides secret values but keeps key names and the hub's own words readable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.redact import REDACTED, own, redact


@pytest.mark.parametrize("text", [
    "servers.c.auth: unknown key 'auth'",
    "servers.c.token: unknown key 'token' (did you mean 'timeout'?)",
    "servers.c.oauth.client_secret: client_secret needs client_id",
    "servers.c.auth: Input should be 'oauth'",
    "hub.http.auth_tokens: expected a list of strings",
    "secret: expected a string",
])
def test_key_names_and_hub_words_survive(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(("text", "secret"), [
    ("password: hunter2", "hunter2"),
    ("token=abc", "abc"),
    ("api_key: abcdefghijklmnopqrstu", "abcdefghijklmnopqrstu"),
    ("client_secret=plainwords", "plainwords"),
    ("auth: Bearer abcdefghij", "abcdefghij"),
    ('token: "tok-123"', "tok-123"),
])
def test_secret_values_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


def test_config_errors_name_secret_like_keys_readably() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[servers.c]\nurl = "https://example.com/mcp"\nauth = "basic"\n')
    message = redact(str(info.value))
    assert "servers.c.auth:" in message
    assert "oauth" in message
    assert REDACTED not in message
    with pytest.raises(ConfigError) as info:
        parse_config('[servers.c]\ncommand = "x"\ntokens = "abc"\n')
    assert "unknown key 'tokens'" in redact(str(info.value))


def test_a_missing_variable_hint_reaches_the_user_whole() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config('[hub]\nstate_dir = "${GITHUB_TOKEN}"\n', environ={})
    message = redact(str(info.value))
    assert message.endswith(
        "environment variable GITHUB_TOKEN is not set (set it, or write ${GITHUB_TOKEN:-default})")
    assert REDACTED not in message


def test_the_oauth_hint_of_login_reaches_the_user_whole(tmp_path: Path) -> None:
    config = tmp_path / "servers.toml"
    config.write_text('[servers.memory]\ncommand = "true"\n')
    done = subprocess.run([sys.executable, "-m", "mcp_hub", "login", "memory",
                           "--config", str(config)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert 'servers.memory: set auth = "oauth" to log in to it' in done.stderr
    assert REDACTED not in done.stderr


@pytest.mark.parametrize(("text", "secret"), [
    ("token=abcdef${GITHUB_TOKEN:-default}", "abcdef"),          # glued: not the hub's hint
    ("write ${GITHUB_TOKEN:-default} password=hunter2", "hunter2"),
    ("or write ${GITHUB_TOKEN:-default} Bearer abcdefghij", "abcdefghij"),
])
def test_secrets_next_to_the_hubs_hints_are_still_hidden(text: str, secret: str) -> None:
    own("${GITHUB_TOKEN:-default}")
    out = redact(text)
    assert secret not in out
    assert REDACTED in out


def test_a_known_secret_is_hidden_even_inside_the_hubs_hint() -> None:
    own("${ZZ_VAR:-s3cr3t-value}")
    out = redact("or write ${ZZ_VAR:-s3cr3t-value})", extra=["s3cr3t-value"])
    assert "s3cr3t-value" not in out
