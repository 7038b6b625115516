"""Read-only JSON-shaped data: the nested parts of cached tool definitions.

Imports nothing of the project.
"""

from __future__ import annotations

import copy
from typing import Any, NoReturn

__all__ = ["FrozenDict", "FrozenList", "freeze"]


def _read_only(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(
        "tool definitions are shared with the registry's cache below the top level; "
        "copy.deepcopy() the definition before changing its nested parts"
    )


class FrozenDict(dict[str, Any]):
    """A dict that refuses mutation: nested parts of cached tool definitions.

    It serialises, compares and validates like a dict; ``copy.copy``,
    ``copy.deepcopy`` and ``dict(x)`` return plain, mutable dicts.
    """

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """The list counterpart of :class:`FrozenDict`."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))


def freeze(value: Any) -> Any:
    """A read-only copy of JSON-shaped data (dicts and lists); scalars are shared."""
    if isinstance(value, dict):
        return FrozenDict({k: freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return FrozenList([freeze(v) for v in value])
    return value
