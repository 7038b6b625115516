"""Builtin tool discovery: import the files in ``builtin_tools/`` that register a tool.

Each candidate file is parsed with :mod:`ast` first, and imported only when its
module level calls ``registry.register(...)`` (also inside a module-level
``if``/``try``/``with``, never inside a function or class). Files named
``_*.py`` and ``__init__.py`` are skipped. A file that fails to parse or import
is a warning; the other tools still load.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import logging
import sys
from collections.abc import Iterable
from pathlib import Path

from mcp_hub.plumbing.module_files import import_file

__all__ = ["discover_builtin_tools", "has_top_level_register"]

logger = logging.getLogger(__name__)

_PACKAGE = "builtin_tools"


def _is_register_call(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "register"):
        return False
    target = func.value
    return (isinstance(target, ast.Name) and target.id == "registry") or (
        isinstance(target, ast.Attribute) and target.attr == "registry"
    )


def _module_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, descending into if/try/with but not def/class."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody):
                yield from _module_level(block)
            for handler in stmt.handlers:
                yield from _module_level(handler.body)
        elif isinstance(stmt, ast.With):
            yield from _module_level(stmt.body)


def has_top_level_register(source: str, filename: str = "<tool>") -> bool:
    """Whether ``source`` calls ``registry.register(...)`` at module level."""
    tree = ast.parse(source, filename=filename)
    for stmt in _module_level(tree.body):
        value: ast.expr | None = None
        if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign):
            value = stmt.value
        if value is not None and _is_register_call(value):
            return True
    return False


def _default_dir() -> Path | None:
    try:
        package = importlib.import_module(_PACKAGE)
    except ImportError as exc:
        logger.warning("no %s package to discover tools in: %s", _PACKAGE, exc)
        return None
    file = getattr(package, "__file__", None)
    if file is not None:
        return Path(file).parent
    paths = list(getattr(package, "__path__", []))
    return Path(paths[0]) if paths else None


def _package_dir() -> Path | None:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _import_path(path: Path, package_dir: Path | None) -> str:
    if package_dir is not None and path.parent.resolve() == package_dir:
        name = f"{_PACKAGE}.{path.stem}"
        importlib.import_module(name)
        return name
    tag = hashlib.sha1(str(path.parent.resolve()).encode()).hexdigest()[:8]
    name = f"mcp_hub_tools_{tag}_{path.stem}"
    if name in sys.modules:
        return name
    import_file(name, path)
    return name


def discover_builtin_tools(tools_dir: Path | None = None) -> list[str]:
    """Import every tool module in ``tools_dir`` (default: the ``builtin_tools`` package).

    Returns the names of the modules imported, in file-name order. Files in the
    ``builtin_tools`` package are imported as ``builtin_tools.<stem>``; files
    elsewhere under a private module name.
    """
    directory = _default_dir() if tools_dir is None else Path(tools_dir)
    if directory is None or not directory.is_dir():
        if directory is not None:
            logger.warning("tools directory %s does not exist", directory)
        return []
    package_dir = _package_dir_if_named(directory)
    imported: list[str] = []
    for path in sorted(directory.glob("*.py")):
        if path.name.startswith("_"):
            continue
        try:
            if not has_top_level_register(path.read_text(encoding="utf-8"), str(path)):
                continue
        except (OSError, SyntaxError, ValueError) as exc:
            logger.warning("builtin tool %s skipped: cannot parse: %s", path.name, exc)
            continue
        try:
            imported.append(_import_path(path, package_dir))
        except Exception as exc:
            logger.warning("builtin tool %s failed to import: %s: %s",
                           path.name, type(exc).__name__, exc)
    return imported


def _package_dir_if_named(directory: Path) -> Path | None:
    """The builtin_tools package dir if ``directory`` is it, so imports stay normal."""
    package_dir = _package_dir()
    if package_dir is not None and directory.resolve() == package_dir:
        return package_dir
    return None
