"""Per-tool caches of what a ``tools/list`` is made of, keyed on a definition's identity.

A tool definition from the registry's definition cache is a small top-level dict
whose nested parts (input schema, annotations, ...) are frozen and keep their
identity for as long as the tool does not change: an upstream's changed tool
gets a new registry entry and so new parts. :func:`definition_key` turns a
definition into a key made of its field names and the identities of its values
(strings are immutable, nested parts frozen), so a new registry generation finds
everything it can reuse (the ``types.Tool`` model here, the serialised JSON in
:mod:`mcp_hub.downstream.lists.fragments`, the token estimate in
:mod:`mcp_hub.search.exposure`) and builds only the tools that changed.
A definition with a part that is not frozen (the ``tool_search`` bridge's own
tools, built anew each time) is never cached.

Imports nothing of the project but :mod:`mcp_hub.registry.frozen`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from mcp import types

from mcp_hub.registry.frozen import FrozenDict, FrozenList

__all__ = ["TOOL_FIELDS", "ToolModels", "cacheable", "definition_key", "tool_model"]

#: The keys of a definition that a ``types.Tool`` carries.
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations",
               "_meta", "icons", "execution")
_SCALARS = (str, int, float, bool)


def definition_key(d: Mapping[str, Any]) -> tuple[Any, ...]:
    """A key that is equal for the same unchanged definition: its keys, and the identity
    of each value. Cheap (no walk of the nested parts); valid for caching only when
    :func:`cacheable` says so, and only while the definition itself is kept alive (so no
    identity is reused while the key lives)."""
    return tuple(d), tuple(map(id, d.values()))


def cacheable(d: Mapping[str, Any]) -> bool:
    """Whether every value is immutable (a string, a number, None) or frozen."""
    return all(v is None or isinstance(v, (*_SCALARS, FrozenDict, FrozenList)) for v in d.values())


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
        hit = self._models.get(key)
        if hit is not None:
            return hit[1]
        model = tool_model(d)
        if not cacheable(d):
            return model
        self._models[key] = (d, model)
        while len(self._models) > self.size:
            self._models.popitem(last=False)
        return model
