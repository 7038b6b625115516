"""The layer rule, checked on the source: every import points down.

CLI → runners/transports (``downstream/``) → Hub (``hub.py``, ``hub_serving.py``)
→ upstream / builtins / search → pipeline → registry. The scan reads every
module of ``mcp_hub/`` with :mod:`ast` (imports inside functions and under
``TYPE_CHECKING`` count too) and fails naming the module and the import that
breaks a rule; ``builtin_tools/`` is scanned too. docs/architecture.md draws
the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_hub"
BUILTINS = ROOT / "builtin_tools"

#: The registry and the small modules it is made of: they import only each other (and naming).
REGISTRY = {"mcp_hub.registry", "mcp_hub.definitions", "mcp_hub.frozen", "mcp_hub.tool_entry",
            "mcp_hub.tool_results", "mcp_hub.errors", "mcp_hub.hub_errors", "mcp_hub.steps"}
#: What the pipeline may import: the registry, argument coercion, hooks, the call context,
#: the quick argument check (a standard-library leaf).
PIPELINE = REGISTRY | {"mcp_hub.pipeline", "mcp_hub.coerce", "mcp_hub.hooks", "mcp_hub.context",
                       "mcp_hub.quick_schema"}
UPSTREAM_INTERNALS = ("mcp_hub.upstream",)
ABOVE_HUB = ("mcp_hub.downstream", "mcp_hub.cli", "mcp_hub.cli_pins", "mcp_hub.cli_errors",
             "mcp_hub.__main__")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str) -> Iterator[str]:
    """Every ``mcp_hub`` module ``source`` imports (``from mcp_hub import x`` yields ``mcp_hub.x``)."""
    package = module if module.count(".") == 0 else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("mcp_hub"):
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, target] if target else base)
            if not target.startswith("mcp_hub"):
                continue
            yield target
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if (PACKAGE.parent / (candidate.replace(".", "/") + ".py")).is_file() or (
                        PACKAGE.parent / candidate.replace(".", "/")).is_dir():
                    yield candidate


def _under(name: str, prefixes: tuple[str, ...] | set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(module: str, imported: str) -> list[str]:
    """The rules ``module`` importing ``imported`` breaks (empty when it is fine)."""
    found: list[str] = []
    if _under(module, ("mcp_hub.downstream",)) and _under(imported, UPSTREAM_INTERNALS):
        found.append("downstream/ must not import upstream internals (ask the Hub)")
    if _under(module, ("mcp_hub.downstream",)) and _under(
            imported, ("mcp_hub.pipeline", "mcp_hub.registry", "mcp_hub.search",
                       "mcp_hub.tool_search", "mcp_hub.definitions")):
        found.append("downstream/ must not reach below the Hub (pipeline, registry, search)")
    if module in REGISTRY and imported not in REGISTRY | {"mcp_hub.naming"}:
        found.append("the registry imports nothing above it")
    if module == "mcp_hub.pipeline" and imported not in PIPELINE:
        found.append("the pipeline imports only the registry, coercion, hooks and the call context")
    if module in ("mcp_hub.hub", "mcp_hub.hub_serving") and _under(imported, ABOVE_HUB):
        found.append("the Hub does not import the serving side or the CLI")
    if _under(module, ("mcp_hub.upstream", "mcp_hub.search")) and _under(
            imported, ("mcp_hub.hub", "mcp_hub.hub_serving", *ABOVE_HUB)):
        found.append("upstream/ and search/ do not import the Hub or anything above it")
    if (not _under(module, ABOVE_HUB) and module not in ("mcp_hub.hub", "mcp_hub.hub_serving")
            and _under(imported, ("mcp_hub.hub", "mcp_hub.hub_serving"))):
        found.append("only the serving side and the CLI import the Hub")
    if not _under(module, ABOVE_HUB) and _under(imported, ABOVE_HUB):
        found.append("only the CLI and the serving side import the serving side")
    if _under(module, ("builtin_tools",)) and _under(
            imported, ("mcp_hub.hub", "mcp_hub.hub_serving", "mcp_hub.upstream", *ABOVE_HUB)):
        found.append("builtin tools reach the Hub through call.hub, never by import")
    if module in ("mcp_hub.config", "mcp_hub.config_path") and _under(
            imported, ("mcp_hub.prespawn", "mcp_hub.launch", "mcp_hub.upstream", "mcp_hub.hub",
                       *ABOVE_HUB)):
        found.append("config imports nothing that runs things")
    return found


def scan() -> list[str]:
    problems = []
    for path in sorted([*PACKAGE.rglob("*.py"), *BUILTINS.rglob("*.py")]):
        module = module_name(path)
        for imported in sorted(set(imports_of(path.read_text(encoding="utf-8"), module))):
            for rule in violations(module, imported):
                problems.append(f"{module} imports {imported}: {rule}")
    return problems


def test_every_import_points_down() -> None:
    assert scan() == []


@pytest.mark.parametrize(("module", "source", "rule"), [
    ("mcp_hub.downstream.server", "from mcp_hub.upstream.manager import UpstreamManager",
     "upstream internals"),
    ("mcp_hub.downstream.server", "import mcp_hub.upstream.connection", "upstream internals"),
    ("mcp_hub.registry", "from mcp_hub.hub import Hub", "the registry imports nothing above it"),
    ("mcp_hub.pipeline", "from mcp_hub import plugins", "the pipeline imports only"),
    ("mcp_hub.hub", "from mcp_hub.downstream.call_context import below_level",
     "the Hub does not import the serving side"),
    ("mcp_hub.config", "from mcp_hub.prespawn import find_config_path",
     "config imports nothing that runs things"),
    ("builtin_tools.hub_status", "from mcp_hub.hub import Hub", "through call.hub"),
    ("mcp_hub.upstream.manager", "def f():\n    from mcp_hub.hub import Hub\n",
     "upstream/ and search/ do not import the Hub"),
    ("mcp_hub.hub_interface", "from mcp_hub.hub import Hub",
     "only the serving side and the CLI import the Hub"),
    ("mcp_hub.context", "from mcp_hub.downstream.server import HubServer",
     "only the CLI and the serving side import the serving side"),
])
def test_the_scan_catches_a_wrong_import(module: str, source: str, rule: str) -> None:
    """The rule is not vacuous: each kind of wrong import is reported."""
    found = [r for imported in imports_of(source, module) for r in violations(module, imported)]
    assert any(rule in r for r in found), found


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports (type-only and function-local imports too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted([*PACKAGE.rglob("*.py"), *BUILTINS.rglob("*.py")]):
        module = module_name(path)
        graph[module] = {i for i in imports_of(path.read_text(encoding="utf-8"), module)
                         if i != module and not module.startswith(i + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    """No two modules import each other, directly or round a loop, in any form."""
    assert circles(import_graph()) == []


def test_the_circle_scan_finds_a_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
