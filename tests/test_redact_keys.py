"""Redaction hides secret values but keeps key names and the hub's own words readable."""

from __future__ import annotations

import pytest

from mcp_hub.config import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.redact import REDACTED, redact


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
