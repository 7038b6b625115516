"""``mcp_hub/errors.py`` draws the whole exception tree, and the hub's own errors are HubErrors.

The scan reads every module of ``mcp_hub/`` and ``builtin_tools/`` with
:mod:`ast`, finds each class that derives (through any chain of the package's
own classes) from a built-in exception or the SDK's ``MCPError``, and checks
that errors.py's docstring names it; and that every one of them is a
``HubError``, except the SDK's protocol errors (``MCPError``: they travel to
the client as JSON-RPC errors) and the two signals that never leave the module
that raises them.
"""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from mcp_hub import errors

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [*sorted((ROOT / "mcp_hub").rglob("*.py")), *sorted((ROOT / "builtin_tools").rglob("*.py"))]
#: Roots outside the package an exception of the package may derive from.
OUTSIDE = {name for name in dir(builtins)
           if isinstance(getattr(builtins, name), type)
           and issubclass(getattr(builtins, name), BaseException)} | {"MCPError"}
#: Raised and caught inside one module (see errors.py): no need to be a HubError.
SIGNALS = {"Refused", "_TooLarge"}


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
            for b in node.bases]


def class_bases(sources: dict[str, str]) -> dict[str, list[str]]:
    """Class name → its base names, for every class of the given sources (module → text)."""
    found: dict[str, list[str]] = {}
    for text in sources.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).extend(_base_names(node))
    return found


def exception_classes(bases: dict[str, list[str]]) -> dict[str, set[str]]:
    """Every exception class → all its ancestors' names (package classes and outside roots)."""
    ancestors: dict[str, set[str]] = {}

    def walk(name: str, seen: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for base in bases.get(name, []):
            out.add(base)
            if base in bases and base not in seen:
                out |= walk(base, seen | {base})
        return out

    for name in bases:
        up = walk(name, frozenset({name}))
        if up & OUTSIDE:
            ancestors[name] = up
    return ancestors


def package_exceptions() -> dict[str, set[str]]:
    return exception_classes(class_bases({str(p): p.read_text(encoding="utf-8") for p in SOURCES}))


def test_errors_py_names_every_exception_class_of_the_package() -> None:
    doc = errors.__doc__ or ""
    missing = sorted(name for name in package_exceptions()
                     if not re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", doc))
    assert missing == []


def test_the_hubs_own_errors_derive_from_hub_error() -> None:
    outside = sorted(name for name, up in package_exceptions().items()
                     if name != "HubError" and "HubError" not in up and "MCPError" not in up
                     and name not in SIGNALS)
    assert outside == []


def test_the_signals_left_out_are_still_defined() -> None:
    """The exceptions to the HubError rule name classes that exist (the list is not stale)."""
    assert set(package_exceptions()) >= SIGNALS


@pytest.mark.parametrize(("source", "expected"), [
    ("class A(Exception): ...\nclass B(A): ...\nclass C: ...", {"A", "B"}),
    ("class E(MCPError): ...", {"E"}),
    ("class H(HubError): ...\nclass HubError(Exception): ...", {"H", "HubError"}),
])
def test_the_scan_finds_exception_classes(source: str, expected: set[str]) -> None:
    assert set(exception_classes(class_bases({"m": source}))) == expected
