"""Editing one member of a JSON(C) document without touching the rest of its bytes."""

from __future__ import annotations

import json

import pytest

from mcp_hub.clients.jsonedit import JsonEditError, get_member, parse, remove_member, set_member

ENTRY = {"command": "/opt/hub/bin/mcp-hub", "args": ["serve"]}


@pytest.mark.parametrize("text", [
    '{"mcpServers":{"a":{"command":"x"}}}',
    '{"mcpServers": {"a": {"command": "x"}}, "theme": "dark"}',
    '{\n    "mcpServers": {\n        "a": {"command": "x"}\n    }\n}\n',
    '{\r\n\t"mcpServers": {\r\n\t\t"a": {"command": "x"}\r\n\t}\r\n}\r\n',
    '{\n  "theme": "dark"\n}\n',
    '{}',
    '{\n  "mcpServers": {}\n}\n',
])
def test_add_then_remove_gives_back_the_same_bytes(text: str) -> None:
    added = set_member(text, "mcpServers", "hub", ENTRY)
    assert json.loads(added)["mcpServers"]["hub"] == ENTRY
    assert {k: v for k, v in json.loads(added).items() if k != "mcpServers"} == \
        {k: v for k, v in json.loads(text).items() if k != "mcpServers"}
    removed = remove_member(added, "mcpServers", "hub")
    if '"mcpServers": {}' in text:
        assert removed is not None and json.loads(removed) == {}  # the empty container goes too
    else:
        assert removed == text


def test_the_file_layout_is_followed() -> None:
    compact = set_member('{"mcpServers":{"a":{"command":"x"}}}', "mcpServers", "hub", ENTRY)
    assert compact == ('{"mcpServers":{"a":{"command":"x"},'
                       '"hub":{"command":"/opt/hub/bin/mcp-hub","args":["serve"]}}}')
    tabs = set_member('{\n\t"mcpServers": {\n\t\t"a": 1\n\t}\n}', "mcpServers", "hub", {"b": 2})
    assert tabs == '{\n\t"mcpServers": {\n\t\t"a": 1,\n\t\t"hub": {\n\t\t\t"b": 2\n\t\t}\n\t}\n}'
    crlf = set_member('{\r\n  "x": 1\r\n}', "mcpServers", "hub", {"b": 2})
    assert "\n" not in crlf.replace("\r\n", "")


def test_replacing_changes_only_the_value() -> None:
    text = '{\n  "mcpServers": {\n    "hub": {"old": true},\n    "z": 1\n  }\n}\n'
    new = set_member(text, "mcpServers", "hub", {"b": 2})
    assert new == '{\n  "mcpServers": {\n    "hub": {\n      "b": 2\n    },\n    "z": 1\n  }\n}\n'
    assert remove_member(new, "mcpServers", "hub") == '{\n  "mcpServers": {\n    "z": 1\n  }\n}\n'


def test_comments_and_trailing_commas_only_where_allowed() -> None:
    text = '// head\n{\n  "servers": { /* keep */\n    "a": 1, // one\n  },\n}\n'
    assert parse(text, comments=True)[0] == {"servers": {"a": 1}}
    with pytest.raises(JsonEditError, match="line 1, column 1"):
        parse(text)
    added = set_member(text, "servers", "hub", {"type": "stdio"}, comments=True)
    assert get_member(added, "servers", "hub", comments=True) == {"type": "stdio"}
    assert remove_member(added, "servers", "hub", comments=True) == text
    # A container holding a comment is kept when the hub's entry was its only member.
    only = '{\n  "servers": {\n    // mine\n    "hub": 1\n  }\n}'
    assert remove_member(only, "servers", "hub", comments=True) == \
        '{\n  "servers": {\n    // mine\n    \n  }\n}'


@pytest.mark.parametrize(("text", "why"), [
    ('{"a": 1,}', "line 1, column 9: trailing comma"),
    ('{"a": 1', "end of file"),
    ('{"a": 1} x', "extra data"),
    ("[1, 2]", "not a JSON object"),
    ('{"mcpServers": [1]}', "'mcpServers' is not a JSON object"),
    ('{"a": "\x01"}', "Invalid control character"),
    ("[" * 5000, "nested too deeply"),
    ('{\n  "a": tru\n}', "line 2, column 8"),
])
def test_malformed_input_is_a_clear_error(text: str, why: str) -> None:
    with pytest.raises(JsonEditError, match=why.replace("(", r"\(")):
        set_member(text, "mcpServers", "hub", ENTRY)


def test_a_missing_member_is_nothing_to_remove() -> None:
    assert remove_member('{"mcpServers": {"a": 1}}', "mcpServers", "hub") is None
    assert remove_member('{"x": 1}', "mcpServers", "hub") is None
    assert get_member('{"x": 1}', "mcpServers", "hub") is None
