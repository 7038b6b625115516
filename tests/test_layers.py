"""The layer rule, checked on the source: every import points down.

The folders of ``mcp_hub/`` are the layers (docs/architecture.md draws them)::

    cli/                      the command line (and ``__main__``)
    downstream/               the serving side: MCP server, HTTP, stdio, replicas
    builtin_tools/            the builtin tools (reach the Hub through ``call.hub``)
    hub/  clients/            the Hub; MCP clients' own config files
    upstream/  search/        upstream connections; tool search and bridging
    pins/ telemetry/ rewrite/ auth/
    state/                    the shared state store
    pipeline/                 the call pipeline
    config/                   servers.toml (with each feature's ``settings`` module)
    registry/                 the tool registry
    protocol/ plumbing/ compat/ eras/ errors redact hub_errors   leaves

A module may import its own folder and any folder below its own; never one
above or beside it. The scan reads every module with :mod:`ast` (imports
inside functions and under ``TYPE_CHECKING`` count too) and fails naming the
module and the import that breaks a rule. A few finer rules stand beside the
ranks (the serving side asks the Hub, never upstream internals; the registry
and the pipeline import only their own small modules).

Each class lives in one place: its methods are defined in one module, and its
parts are objects it holds, not classes it inherits. So no class of the package
is named ``*Mixin``, and none has two or more bases defined in the package
(:func:`class_problems`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mcp_hub"
BUILTINS = ROOT / "builtin_tools"

#: Each layer's rank: a module imports only its own layer or layers of a higher number.
RANKS: dict[str, float] = {
    "__main__": -1, "cli": 0,
    "downstream": 1,
    "hub": 2, "clients": 2,
    "builtin_tools": 1.5,
    "upstream": 3, "search": 3,
    "pins": 4, "telemetry": 4, "rewrite": 4, "auth": 4,
    "state": 4.5,
    "pipeline": 5,
    "config": 6,
    "registry": 7,
    "protocol": 8, "plumbing": 8, "compat": 8, "eras": 8, "redact": 8, "errors": 8.5,
    "hub_errors": 9,
}
#: At most this many modules lie flat in ``mcp_hub/``; no folder holds more than MAX_IN_FOLDER.
MAX_FLAT = 12
MAX_IN_FOLDER = 20

#: The registry's modules import only each other (and the leaves).
REGISTRY = ("mcp_hub.registry",)
#: What the call pipeline (``pipeline/calls.py``) may import.
PIPELINE = {"mcp_hub.registry", "mcp_hub.pipeline.coerce", "mcp_hub.pipeline.hooks", "mcp_hub.pipeline.context",
            "mcp_hub.pipeline.quick_schema", "mcp_hub.errors", "mcp_hub.hub_errors"}
UPSTREAM_INTERNALS = ("mcp_hub.upstream",)
THE_HUB = ("mcp_hub.hub.core",)
ABOVE_HUB = ("mcp_hub.downstream", "mcp_hub.cli", "mcp_hub.__main__")


def layer_of(module: str) -> str:
    """The layer a module belongs to: its first folder, or ``config`` for a feature's settings model."""
    parts = module.split(".")
    if parts[0] == "builtin_tools":
        return "builtin_tools"
    if len(parts) == 1:
        return "mcp_hub"
    if parts[-1] == "settings" and len(parts) == 3:
        return "config"
    return parts[1]


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
    mine, theirs = layer_of(module), layer_of(imported)
    if imported != "mcp_hub" and mine != theirs and RANKS[theirs] <= RANKS[mine]:
        found.append(f"{mine}/ (rank {RANKS[mine]}) must not import {theirs}/ (rank {RANKS[theirs]}): "
                     "imports point down")
    if _under(module, ("mcp_hub.downstream",)) and _under(imported, UPSTREAM_INTERNALS):
        found.append("downstream/ must not import upstream internals (ask the Hub)")
    if _under(module, ("mcp_hub.downstream",)) and _under(
            imported, ("mcp_hub.pipeline.calls", "mcp_hub.registry.tool_registry", "mcp_hub.search",
                       "mcp_hub.registry.definitions")):
        found.append("downstream/ must not reach below the Hub (pipeline, registry, search)")
    if _under(module, REGISTRY) and not _under(
            imported, (*REGISTRY, "mcp_hub.errors", "mcp_hub.hub_errors", "mcp_hub.protocol", "mcp_hub.plumbing")):
        found.append("the registry imports nothing above it")
    if module == "mcp_hub.pipeline.calls" and not _under(imported, PIPELINE):
        found.append("the pipeline imports only the registry, coercion, hooks and the call context")
    if _under(module, ("mcp_hub.hub",)) and _under(imported, ABOVE_HUB):
        found.append("the Hub does not import the serving side or the CLI")
    if (not _under(module, (*ABOVE_HUB, "mcp_hub.hub")) and _under(imported, THE_HUB)):
        found.append("only the serving side and the CLI import the Hub")
    if _under(module, ("builtin_tools",)) and _under(imported, (*THE_HUB, *ABOVE_HUB)):
        found.append("builtin tools reach the Hub through call.hub, never by import")
    if _under(module, ("mcp_hub.config",)) and _under(
            imported, ("mcp_hub.upstream", "mcp_hub.clients", "mcp_hub.hub", *ABOVE_HUB)):
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
    ("mcp_hub.registry.tool_registry", "from mcp_hub.hub.core import Hub", "the registry imports nothing above it"),
    ("mcp_hub.registry.tool_registry", "from mcp_hub.config.model import HubConfig", "imports point down"),
    ("mcp_hub.pipeline.calls", "from mcp_hub.pipeline import plugins", "the pipeline imports only"),
    ("mcp_hub.hub.core", "from mcp_hub.downstream.call_context import below_level",
     "the Hub does not import the serving side"),
    ("mcp_hub.config.model", "from mcp_hub.upstream.stdio.prespawn import find_config_path",
     "config imports nothing that runs things"),
    ("builtin_tools.hub_status", "from mcp_hub.hub.core import Hub", "through call.hub"),
    ("mcp_hub.upstream.manager", "def f():\n    from mcp_hub.hub.core import Hub\n", "imports point down"),
    ("mcp_hub.hub.interface", "from mcp_hub.cli.main import main", "the Hub does not import the serving side"),
    ("mcp_hub.pipeline.context", "from mcp_hub.downstream.server import HubServer", "imports point down"),
    ("mcp_hub.pins.pinning", "from mcp_hub.telemetry import spans", "imports point down"),
    ("mcp_hub.plumbing.pipes", "if TYPE_CHECKING:\n    from mcp_hub.config.model import HubConfig\n",
     "imports point down"),
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


def test_every_module_lies_in_a_known_layer() -> None:
    """A new folder gets a rank here (and a line in docs/architecture.md) before it gets code."""
    unknown = sorted({layer_of(module_name(p)) for p in PACKAGE.rglob("*.py")} - {*RANKS, "mcp_hub"})
    assert unknown == []


def test_the_tree_stays_small_enough_to_read() -> None:
    """At most MAX_FLAT modules flat in ``mcp_hub/``, at most MAX_IN_FOLDER in any folder."""
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat
    crowded = {str(d.relative_to(ROOT)): n for d in PACKAGE.rglob("*") if d.is_dir()
               if (n := len(list(d.glob("*.py")))) > MAX_IN_FOLDER}
    assert crowded == {}


def package_classes(sources: dict[str, str]) -> set[str]:
    """The names of every class the package defines (nested ones too)."""
    return {node.name for source in sources.values() for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ClassDef)}


def _package_names(tree: ast.Module, classes: set[str]) -> tuple[set[str], set[str]]:
    """(class names that mean a class of the package here, aliases of the package's modules)."""
    names = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("mcp_hub")):
            for alias in node.names:
                if alias.name in classes:
                    names.add(alias.asname or alias.name)
                else:  # ``from mcp_hub.hub import core``: a module
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            modules.update(alias.asname or alias.name.split(".")[0]
                           for alias in node.names if alias.name.startswith("mcp_hub"))
    return names, modules


def _is_package_class(base: ast.expr, names: set[str], modules: set[str], classes: set[str]) -> bool:
    """Whether a base (``Name``, ``module.Name``, ``Name[...]``) is a class of the package."""
    if isinstance(base, ast.Subscript):
        base = base.value
    if isinstance(base, ast.Name):
        return base.id in names
    if isinstance(base, ast.Attribute) and base.attr in classes:
        root = base.value
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id in modules
    return False


def class_problems(module: str, source: str, classes: set[str]) -> list[tuple[str, str]]:
    """(class, why) for each class of ``module`` named ``*Mixin`` or built on two or more of
    the package's classes (``classes``: every class name the package defines)."""
    tree = ast.parse(source)
    names, modules = _package_names(tree, classes)
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        ours = [ast.unparse(b) for b in node.bases if _is_package_class(b, names, modules, classes)]
        if node.name.endswith("Mixin"):
            found.append((f"{module}.{node.name}", "a mixin; make it a part the class holds"))
        if len(ours) >= 2:
            found.append((f"{module}.{node.name}", f"inherits {', '.join(ours)}: two or more of "
                          "the package's classes; hold them as parts instead"))
    return found


def test_each_class_lives_in_one_place() -> None:
    """No ``*Mixin`` class, no class made of two or more of the package's classes."""
    sources = {module_name(p): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}
    classes = package_classes(sources)
    problems = [f"{name}: {why}" for module, source in sources.items()
                for name, why in class_problems(module, source, classes)]
    assert problems == []


@pytest.mark.parametrize(("source", "rule"), [
    ("class ServingMixin:\n    pass\n", "a mixin"),
    ("class Parts:\n    pass\nclass More:\n    pass\nclass Hub(Parts, More):\n    pass\n",
     "two or more"),
    ("from mcp_hub.hub.drain import Drain\nfrom mcp_hub.hub.sessions import SessionTracker as S\n"
     "class Both(Drain, S):\n    pass\n", "two or more"),
    ("import mcp_hub.hub.drain\nfrom mcp_hub.hub import sessions\n"
     "class Both(mcp_hub.hub.drain.Drain, sessions.SessionTracker):\n    pass\n", "two or more"),
    ("from mcp_hub.errors import HubError\nclass Fine(HubError, ValueError):\n    pass\n", None),
    ("from mcp import types\nclass Fine(types.Request[int, str]):\n    pass\n", None),
])
def test_the_class_scan_catches_a_wrong_class(source: str, rule: str | None) -> None:
    """The rule is not vacuous: a mixin and a class of two package bases are reported;
    one package base beside a library's is not."""
    classes = package_classes({"mcp_hub.hub": (PACKAGE / "hub/drain.py").read_text(encoding="utf-8")
                               + (PACKAGE / "hub/sessions.py").read_text(encoding="utf-8")
                               + (PACKAGE / "errors.py").read_text(encoding="utf-8")})
    found = class_problems("mcp_hub.hub.example", source, classes)
    if rule is None:
        assert found == []
    else:
        assert any(rule in why for _, why in found), found


def foreign_private_writes(source: str) -> Iterator[str]:
    """Every assignment to another object's private attribute (``hub._origins = …``;
    ``self._x`` and ``cls._x`` are a class's own)."""
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
        for target in targets:
            if (isinstance(target, ast.Attribute) and target.attr.startswith("_")
                    and not target.attr.startswith("__")
                    and not (isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"))):
                yield f"line {target.lineno}: {ast.unparse(target)}"


def test_the_hubs_parts_write_only_their_own_state() -> None:
    """A part of the Hub (``mcp_hub/hub/``) keeps its state in its own attributes: it never
    writes the Hub's private attributes, nor another part's."""
    found = {str(p.relative_to(ROOT)): writes for p in sorted((PACKAGE / "hub").glob("*.py"))
             if (writes := list(foreign_private_writes(p.read_text(encoding="utf-8"))))}
    assert found == {}


@pytest.mark.parametrize(("source", "caught"), [
    ("def walk(hub):\n    hub._origins = (1, {}, {})\n", True),
    ("def walk(hub):\n    hub.listing._bridge_active[1] = True\n", False),  # a read, then an item
    ("class Part:\n    def __init__(self):\n        self._origins = None\n", False),
    ("def count(hub):\n    hub._calls += 1\n", True),
])
def test_the_private_write_scan_catches_a_write(source: str, caught: bool) -> None:
    assert bool(list(foreign_private_writes(source))) is caught
