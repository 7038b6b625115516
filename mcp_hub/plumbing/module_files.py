"""Importing a Python file (or package folder) as a module under a private name.

Builtin tool discovery and plugin loading both do it; a module that fails while
importing is taken out of ``sys.modules`` again, so a retry starts clean.
Imports nothing of the project.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["import_file"]


def import_file(name: str, path: Path, *, package_dir: Path | None = None) -> ModuleType:
    """Import ``path`` as module ``name``; ``package_dir`` makes it a package (its folder)."""
    spec = importlib.util.spec_from_file_location(
        name, path,
        submodule_search_locations=[str(package_dir)] if package_dir is not None else None)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module
