"""The quick argument check never says yes where jsonschema says no.

:func:`mcp_hub.pipeline.quick_schema.quick_check` lets the pipeline skip ``jsonschema``
for arguments it vouches for, so it must be sound: for every schema it compiles
and every instance, a True must match a valid instance. Hypothesis draws flat
schemas (the shape it compiles) and arbitrary JSON arguments.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for

from mcp_hub.pipeline.quick_schema import quick_check

TYPES = ["integer", "number", "string", "boolean", "null", "object", "array"]
NAMES = ["a", "b", "c"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(NAMES), inner,
                                                                 max_size=2),
    max_leaves=4)
property_schemas = st.one_of(
    st.just({}), st.just(True),
    st.builds(lambda t: {"type": t, "description": "x"}, st.sampled_from(TYPES)),
    st.builds(lambda ts: {"type": ts}, st.lists(st.sampled_from(TYPES), min_size=1, max_size=3)),
)
schemas = st.builds(
    lambda props, required, extra: {
        "type": "object", "properties": props, "required": required,
        **({} if extra is None else {"additionalProperties": extra})},
    st.dictionaries(st.sampled_from(NAMES), property_schemas, max_size=3),
    st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    st.sampled_from([None, True, False]))


def _valid(schema: dict[str, Any], instance: Any) -> bool:
    return bool(validator_for(schema)(schema).is_valid(instance))


@settings(max_examples=400, deadline=None)
@given(schemas, st.dictionaries(st.sampled_from([*NAMES, "z"]), json_values, max_size=4))
def test_a_yes_is_always_valid(schema: dict[str, Any], args: dict[str, Any]) -> None:
    check = quick_check(schema)
    assert check is not None  # every drawn schema has the shape it compiles
    if check(args):
        assert _valid(schema, args), (schema, args)


def test_common_arguments_pass_quickly() -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string", "title": "Text"},
                                               "n": {"type": "integer"}},
              "required": ["text"], "additionalProperties": False}
    check = quick_check(schema)
    assert check is not None
    assert check({"text": "hi", "n": 3})
    assert not check({"n": 3})            # required missing: the full check words it
    assert not check({"text": "hi", "x": 1})  # closed object
    assert not check({"text": 1})
    assert not check({"text": "hi", "n": True})  # bool is not an integer
    assert not check({"text": "hi", "n": 1.0})   # left to jsonschema (valid there)
    assert _valid(schema, {"text": "hi", "n": 1.0})


def test_other_schemas_are_left_to_jsonschema() -> None:
    for schema in (
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {"a": {"type": "string", "format": "email"}}},
        {"type": "object", "patternProperties": {"^x": {}}},
        {"anyOf": [{"type": "object"}]},
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"},
        {"type": "array"},
    ):
        assert quick_check(schema) is None, schema
