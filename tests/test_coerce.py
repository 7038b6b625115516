"""coerce_tool_args: the forgiving conversions of the call pipeline's first step."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_hub.pipeline import coerce
from mcp_hub.pipeline.coerce import coerce_tool_args, coerce_value
from mcp_hub.registry.tool_registry import ToolRegistry

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "flag": {"type": "boolean"},
        "maybe": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "opts": {"type": "object"},
        "name": {"type": "string"},
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
        "legacy": {"type": "integer", "nullable": True},
    },
}


def c(**args: Any) -> dict[str, Any]:
    return coerce_tool_args(SCHEMA, args)


@pytest.mark.parametrize(
    ("key", "given", "expected"),
    [
        ("count", "42", 42),
        ("count", " -7 ", -7),
        ("ratio", "4.5", 4.5),
        ("ratio", "42", 42),
        ("flag", "true", True),
        ("flag", "False", False),
        ("maybe", "null", None),
        ("maybe", "3", 3),
        ("tags", '["a", "b"]', ["a", "b"]),
        ("opts", '{"k": 1}', {"k": 1}),
        ("tags", "solo", ["solo"]),
        ("ids", "5", [5]),
        ("ids", 5, [5]),
        ("either", "true", True),
        ("either", "12", 12),
        ("legacy", "null", None),
    ],
)
def test_mistyped_values_are_converted(key: str, given: Any, expected: Any) -> None:
    result = c(**{key: given})[key]
    assert result == expected and type(result) is type(expected)


@pytest.mark.parametrize(
    ("key", "given"),
    [
        ("count", "4.5"),           # never a float for an integer
        ("count", "abc"),
        ("ratio", "nan"),
        ("ratio", "inf"),
        ("flag", "yes"),
        ("name", "42"),             # already fits: strings stay strings
        ("count", 42),
        ("opts", '["not", "an", "object"]'),
        ("opts", "{broken json"),
        ("opts", "plain"),
        ("flag", None),
    ],
)
def test_values_that_fit_or_cannot_be_converted_are_kept(key: str, given: Any) -> None:
    assert c(**{key: given})[key] == given


def test_a_json_string_of_the_wrong_container_type_is_not_parsed() -> None:
    assert c(tags='{"a": 1}')["tags"] == ['{"a": 1}']


def test_nested_properties_are_not_touched() -> None:
    schema = {"type": "object", "properties": {"outer": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}}
    args = {"outer": {"n": "1"}}
    assert coerce_tool_args(schema, args) == {"outer": {"n": "1"}}


def test_unknown_arguments_are_left_for_validation() -> None:
    assert c(extra="1") == {"extra": "1"}


def test_the_callers_dict_is_not_mutated_and_unchanged_args_are_returned_as_is() -> None:
    args = {"count": "1", "name": "x"}
    out = coerce_tool_args(SCHEMA, args)
    assert out == {"count": 1, "name": "x"}
    assert args == {"count": "1", "name": "x"}
    fine = {"count": 1}
    assert coerce_tool_args(SCHEMA, fine) is fine


def test_a_tool_name_is_looked_up_in_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    reg = ToolRegistry()
    reg.register("t", "x", {"inputSchema": SCHEMA}, lambda a, **k: "")
    assert coerce_tool_args("t", {"count": "3"}, registry=reg) == {"count": 3}
    assert coerce_tool_args("missing", {"count": "3"}, registry=reg) == {"count": "3"}
    monkeypatch.setattr(coerce, "default_registry", reg)
    assert coerce_tool_args("t", {"flag": "true"}) == {"flag": True}


def test_full_tool_schemas_in_both_styles_are_accepted() -> None:
    assert coerce_tool_args({"inputSchema": SCHEMA}, {"count": "2"}) == {"count": 2}
    assert coerce_tool_args({"parameters": SCHEMA}, {"count": "2"}) == {"count": 2}


def test_schemas_without_properties_or_non_dict_args_pass_through() -> None:
    assert coerce_tool_args({"type": "object"}, {"a": "1"}) == {"a": "1"}
    odd: Any = ["x"]
    assert coerce_tool_args(SCHEMA, odd) is odd


def test_a_property_without_a_type_keeps_its_value() -> None:
    assert coerce_value("1", {}) == "1"
    assert coerce_value("1", {"type": ["integer", 3]}) == 1
    assert coerce_value("1", {"anyOf": ["junk", {"type": "integer"}]}) == 1


def test_a_nullable_string_keeps_the_literal_text_null() -> None:
    schema = {"properties": {"s": {"type": ["string", "null"]}}}
    assert coerce_tool_args(schema, {"s": "null"}) == {"s": "null"}
