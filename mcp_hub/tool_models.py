"""Per-tool caches of what a ``tools/list`` is made of, keyed on a definition's identity.

A tool definition from the registry's definition cache is a small top-level dict
whose nested parts (input schema, annotations, ...) are frozen and keep their
identity for as long as the tool does not change: an upstream's changed tool
gets a new registry entry and so new parts. :func:`definition_key` turns a
definition into a key made of its strings (by value) and the identities of its
frozen parts, so a new registry generation finds everything it can reuse (the
``types.Tool`` model here, the serialised JSON in
:mod:`mcp_hub.downstream.list_fragments`) and builds only the tools that changed.
A definition with a part that is not frozen (the ``tool_search`` bridge's own
tools, built anew each time) has no key and is always built.

Imports nothing of the project but :mod:`mcp_hub.frozen`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mcp import types

from mcp_hub.frozen import FrozenDict, FrozenList

__all__ = ["TOOL_FIELDS", "ToolModels", "definition_key"]

#: The keys of a definition that a ``types.Tool`` carries.
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations",
               "_meta", "icons", "execution")
_SCALARS = (str, int, float, bool)


def definition_key(d: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """A key that is equal for the same unchanged definition, or None when it has none.

    Strings and numbers count by value, frozen parts by identity; whoever keeps a
    value under this key keeps the definition too, so no identity is reused while
    the key lives.
    """
    parts: list[Any] = []
    for field in TOOL_FIELDS:
        value = d.get(field)
        if value is None or isinstance(value, _SCALARS):
            parts.append(value)
        elif isinstance(value, FrozenDict | FrozenList):
            parts.append(id(value))
        else:
            return None
    return tuple(parts)


def tool_model(d: Mapping[str, Any]) -> types.Tool:
    """The SDK's ``Tool`` for a definition (the hub's ``tools/list`` entries)."""
    return types.Tool.model_validate({k: d[k] for k in TOOL_FIELDS if k in d})


class ToolModels:
    """A bounded cache of ``types.Tool`` models per :func:`definition_key`."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._models: OrderedDict[tuple[Any, ...], tuple[Mapping[str, Any], types.Tool]] = OrderedDict()

    def model(self, d: Mapping[str, Any]) -> types.Tool:
        """The cached model of ``d``, built once per unchanged definition."""
        key = definition_key(d)
        if key is None:
            return tool_model(d)
        hit = self._models.get(key)
        if hit is not None:
            return hit[1]
        model = tool_model(d)
        self._models[key] = (d, model)
        while len(self._models) > self.size:
            self._models.popitem(last=False)
        return model
