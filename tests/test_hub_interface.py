"""The Hub's interface is a named type, and the serving side keeps to it.

:mod:`mcp_hub.hub.interface` names what the serving side may ask of the Hub
(:class:`~mcp_hub.hub.interface.ServingHub`) and :mod:`mcp_hub.pipeline.context` what a
builtin tool may (:class:`~mcp_hub.pipeline.context.ToolHub`); ``mypy --strict`` holds
every annotated use to them. This scan holds the rest: nothing is typed
``hub: Any`` (which would let any use through), and no module of
``mcp_hub/downstream/`` reads an attribute of the Hub that ``ServingHub`` does
not name (``hub.registry.generation``, ``hub.upstreams.statuses()``, even
through ``getattr``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_hub"
DOWNSTREAM = PACKAGE / "downstream"
INTERFACE = PACKAGE / "hub/interface.py"


def _is_any(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Name):
        return annotation.id == "Any"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Any"
    if isinstance(annotation, ast.Constant):
        return annotation.value == "Any"
    return False


def _hub_name(node: ast.expr) -> bool:
    """Whether ``node`` names the Hub: ``hub`` or ``<name>.hub`` (not ``config.hub``, the settings)."""
    if isinstance(node, ast.Name):
        return node.id in ("hub", "_hub")
    return (isinstance(node, ast.Attribute) and node.attr in ("hub", "_hub")
            and isinstance(node.value, ast.Name) and "config" not in node.value.id
            and node.value.id != "cfg")


def hub_typed_any(source: str) -> Iterator[int]:
    """Lines where a parameter, variable or field called ``hub`` is annotated ``Any``."""
    for node in ast.walk(ast.parse(source)):
        untyped_arg = isinstance(node, ast.arg) and node.arg in ("hub", "_hub")
        untyped_field = isinstance(node, ast.AnnAssign) and _hub_name(node.target)
        if (untyped_arg or untyped_field) and _is_any(getattr(node, "annotation", None)):
            yield node.lineno


def hub_attributes(source: str) -> Iterator[tuple[int, str]]:
    """(line, attribute) of every attribute of the Hub the code reads or calls."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _hub_name(node.value):
            yield node.lineno, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and _hub_name(node.args[0]) and isinstance(node.args[1], ast.Constant)):
            yield node.lineno, str(node.args[1].value)


def serving_members() -> set[str]:
    """The names :class:`ServingHub` declares, methods and attributes (read from its source,
    as mypy does)."""
    tree = ast.parse(INTERFACE.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ServingHub":
            return ({n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
                    | {n.target.id for n in node.body
                       if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)})
    raise AssertionError("mcp_hub/hub/interface.py defines no ServingHub")


def test_nothing_is_typed_hub_any() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}"
             for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "builtin_tools").rglob("*.py")])
             for line in hub_typed_any(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_serving_side_reaches_only_what_serving_hub_names() -> None:
    members = serving_members()
    found = [f"{path.relative_to(ROOT)}:{line}: hub.{attr}"
             for path in sorted(DOWNSTREAM.rglob("*.py"))
             for line, attr in hub_attributes(path.read_text(encoding="utf-8"))
             if attr not in members]
    assert found == []


def test_the_hub_has_every_member_the_interfaces_name() -> None:
    """The Protocols describe the real Hub (mypy checks the types where a Hub is passed)."""
    missing = sorted(m for m in serving_members() if not hasattr(Hub, m)
                     and m not in Hub.__init__.__code__.co_names)
    assert missing == []
    assert CallContext().hub is None


@pytest.mark.parametrize(("source", "expected"), [
    ("def f(hub: Any) -> None: ...", [1]),
    ("def f(hub: 'Any') -> None: ...", [1]),
    ("class C:\n    hub: Any = None\n", [2]),
    ("def f(hub: ServingHub, config: Any) -> None: ...", []),
])
def test_the_any_scan_finds_an_untyped_hub(source: str, expected: list[int]) -> None:
    assert list(hub_typed_any(source)) == expected


@pytest.mark.parametrize(("source", "expected"), [
    ("hub.registry.generation", [(1, "registry")]),
    ("self.hub.upstreams.statuses()", [(1, "upstreams")]),
    ("getattr(hub, 'per_user', None)", [(1, "per_user")]),
    ("hub.config.hub.name", [(1, "config")]),
    ("config.hub.name", []),
])
def test_the_reach_scan_names_what_the_serving_side_reads(
        source: str, expected: list[tuple[int, str]]) -> None:
    assert list(hub_attributes(source)) == expected
