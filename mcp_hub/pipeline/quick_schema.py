"""A quick yes for the arguments of the common tool schema, before ``jsonschema`` runs.

Most tools take a flat object: named properties of plain JSON types, some of
them required. ``jsonschema`` checks such arguments by building a new validator
object for every property it descends into, which profiles of a busy hub showed
at several per cent of its CPU. :func:`quick_check` compiles a schema of that
shape into a plain predicate that answers True only when the arguments are
certainly valid; anything it does not vouch for (a False, or a schema it does
not know) goes to ``jsonschema`` as before, which also words the errors. So the
predicate may be stricter than the schema, never looser: an integer given as
``1.0`` or an unknown keyword simply takes the full check.

Standard library only; imported by :mod:`mcp_hub.pipeline.calls`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["quick_check"]

#: Keywords that never change whether an instance is valid (annotations).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "deprecated",
                          "readOnly", "writeOnly", "$comment"})
_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties", "$schema",
                          "$id"}) | _ANNOTATIONS
_PROPERTY_KEYS = frozenset({"type"}) | _ANNOTATIONS


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _is_string(v: Any) -> bool:
    return type(v) is str


def _is_bool(v: Any) -> bool:
    return type(v) is bool


def _is_null(v: Any) -> bool:
    return v is None


def _is_object(v: Any) -> bool:
    return type(v) is dict


def _is_array(v: Any) -> bool:
    return type(v) is list


def _any(v: Any) -> bool:
    return True


#: Exact Python types only (bool is not a number, 1.0 is left to jsonschema as an integer).
_TYPES: dict[str, Callable[[Any], bool]] = {
    "integer": _is_int, "number": _is_number, "string": _is_string, "boolean": _is_bool,
    "null": _is_null, "object": _is_object, "array": _is_array}


def _property_check(schema: Any) -> Callable[[Any], bool] | None:
    if schema is True or schema == {}:
        return _any
    if not isinstance(schema, Mapping) or not set(schema) <= _PROPERTY_KEYS:
        return None
    kind = schema.get("type")
    if kind is None:
        return _any
    if isinstance(kind, str):
        return _TYPES.get(kind)
    if isinstance(kind, list) and kind and all(isinstance(k, str) and k in _TYPES for k in kind):
        checks = tuple(_TYPES[k] for k in kind)
        return lambda v: any(check(v) for check in checks)
    return None


def quick_check(schema: Any) -> Callable[[dict[str, Any]], bool] | None:
    """A predicate that is True only for arguments valid under ``schema``, or None when
    ``schema`` is not a flat object schema this module understands."""
    if not isinstance(schema, Mapping) or not set(schema) <= _OBJECT_KEYS:
        return None
    if schema.get("type", "object") != "object" or "draft-03" in str(schema.get("$schema", "")):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if (not isinstance(properties, Mapping) or not isinstance(required, list)
            or not all(isinstance(r, str) for r in required) or extra not in (True, False)):
        return None
    checks: dict[str, Callable[[Any], bool]] = {}
    for name, sub in properties.items():
        check = _property_check(sub)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)
    closed = extra is False

    def valid(args: dict[str, Any]) -> bool:
        for name in needed:
            if name not in args:
                return False
        for name, value in args.items():
            check = checks.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(value):
                return False
        return True

    return valid
