"""Argument coercion: forgive the usual ways models mistype tool arguments.

Models often send ``"42"`` for an integer, ``"true"`` for a boolean or a JSON
string where an array is expected. Before validation, each *top-level* argument
whose value does not fit its declared type is converted when the conversion is
unambiguous:

* ``"42"`` → 42 (integer or number), ``"4.5"`` → 4.5 (number only, never integer);
* ``"true"``/``"false"`` → bool (boolean);
* ``"null"`` → None where the property is nullable;
* a JSON string → the parsed array/object when that type is expected;
* a bare scalar where an array is expected → ``[value]`` (the element coerced
  against ``items`` when possible).

A value that already fits, or whose conversion fails, is kept as is; validation
then reports it. The caller's dict is never mutated: a changed argument set is a
new (shallow) dict, an unchanged one is returned as is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from mcp_hub.registry.tool_registry import ToolRegistry, input_schema_of
from mcp_hub.registry.tool_registry import registry as default_registry

__all__ = ["coerce_tool_args", "coerce_value"]

_INT_RE = re.compile(r"[+-]?\d+")
_MISSING = object()


def _types_of(prop: Mapping[str, Any]) -> set[str]:
    """The JSON types a property schema admits (``type``, or ``anyOf``/``oneOf`` branches)."""
    declared = prop.get("type")
    types: set[str] = set()
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    for key in ("anyOf", "oneOf"):
        branches = prop.get(key)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, Mapping):
                    types |= _types_of(branch)
    if prop.get("nullable") is True:
        types.add("null")
    return types


def _fits(value: Any, types: set[str]) -> bool:
    for t in types:
        if t == "string" and isinstance(value, str):
            return True
        if t == "boolean" and isinstance(value, bool):
            return True
        if t == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if (
            t == "number"
            and isinstance(value, int | float)
            and not isinstance(value, bool)
        ):
            return True
        if t == "array" and isinstance(value, list):
            return True
        if t == "object" and isinstance(value, dict):
            return True
        if t == "null" and value is None:
            return True
    return False


def _from_string(value: str, types: set[str]) -> Any:
    text = value.strip()
    if "null" in types and text == "null":
        return None
    if "integer" in types or "number" in types:
        if _INT_RE.fullmatch(text):
            return int(text)
        if "number" in types:
            try:
                number = float(text)
            except ValueError:
                pass
            else:
                if math.isfinite(number):
                    return number
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if ("array" in types or "object" in types) and text[:1] in ("[", "{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return _MISSING
        if _fits(parsed, types & {"array", "object"}):
            return parsed
    return _MISSING


def coerce_value(value: Any, prop: Mapping[str, Any]) -> Any:
    """``value`` converted to fit property schema ``prop``, or ``value`` unchanged."""
    types = _types_of(prop)
    if not types or _fits(value, types):
        return value
    if isinstance(value, str):
        converted = _from_string(value, types)
        if converted is not _MISSING:
            return converted
    if "array" in types and not isinstance(value, list | dict):
        items = prop.get("items")
        element = coerce_value(value, items) if isinstance(items, Mapping) else value
        return [element]
    return value


# properties object → (that object, property name → admitted types); identity-checked.
_plans: dict[int, tuple[Mapping[str, Any], dict[str, set[str]]]] = {}
_MAX_PLANS = 50_000


def _plan(props: Mapping[str, Any]) -> dict[str, set[str]]:
    """The admitted types of each property, computed once per schema object."""
    cached = _plans.get(id(props))
    if cached is not None and cached[0] is props:
        return cached[1]
    plan = {k: _types_of(p) for k, p in props.items() if isinstance(p, Mapping)}
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    _plans[id(props)] = (props, plan)
    return plan


def coerce_tool_args(
    name_or_schema: str | Mapping[str, Any],
    args: dict[str, Any],
    *,
    registry: ToolRegistry | None = None,
) -> dict[str, Any]:
    """Coerce the top-level ``args`` of a tool (by registry name) or of an input schema.

    An unknown tool name or a schema without ``properties`` leaves ``args`` as is.
    """
    if isinstance(name_or_schema, str):
        entry = (default_registry if registry is None else registry).get_entry(name_or_schema)
        if entry is None:
            return args
        schema: Mapping[str, Any] = input_schema_of(entry.schema)
    elif "inputSchema" in name_or_schema or "parameters" in name_or_schema:
        schema = input_schema_of(name_or_schema)
    else:
        schema = name_or_schema
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not isinstance(args, dict):
        return args
    plan = _plan(props)
    changed: dict[str, Any] | None = None
    for key, value in args.items():
        types = plan.get(key)
        if not types or _fits(value, types):  # the common case: nothing to do
            continue
        new = coerce_value(value, props[key])
        if new is not value:
            if changed is None:
                changed = dict(args)
            changed[key] = new
    return args if changed is None else changed
