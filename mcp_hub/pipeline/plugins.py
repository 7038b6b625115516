"""Plugins and the hooks they attach to the call pipeline.

A plugin is a module (or object) with ``register(ctx)``. It is found through the
entry-point group ``mcp_hub.plugins`` or as a ``*.py`` file / package in a
plugins directory. In ``register`` it calls :meth:`PluginContext.register_tool`
and :meth:`PluginContext.register_hook`.

Hooks are called with keyword arguments, sync or async (sync ones in a worker
thread), each bounded by a timeout (default 5 s):

* ``pre_tool_call(tool, args, **ctx)`` → None to proceed, a dict to replace the
  arguments, a str (or ``PreHookOutcome(blocked=...)``) to block the call.
  A pre hook that raises or times out blocks the call: fail closed.
* ``post_tool_call(tool, args, result, duration_ms, status, **ctx)`` observes;
  ``status`` is ``"ok"``, ``"error"`` or ``"blocked"``.
* ``transform_tool_result(tool, args, result, **ctx)`` → None to pass, or a
  replacement (``CallToolResult``, str or JSON-able value); the first wins.

Post and transform hooks that raise or time out are logged and skipped.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from mcp_hub.pipeline.hooks import HOOK_NAMES, Hook, HookManager, HookStatus, PreHookOutcome
from mcp_hub.plumbing.module_files import import_file
from mcp_hub.registry.tool_registry import ToolRegistry

__all__ = [
    "HOOK_NAMES",
    "HookManager",
    "HookStatus",
    "PluginContext",
    "PreHookOutcome",
    "load_plugins",
]

logger = logging.getLogger(__name__)


@dataclass
class PluginContext:
    """What a plugin's ``register(ctx)`` receives."""

    registry: ToolRegistry
    hooks: HookManager
    config: dict[str, Any] = field(default_factory=dict)
    plugin_name: str = ""
    #: Tools this plugin registered, for status output.
    tools: list[str] = field(default_factory=list)

    def register_tool(
        self,
        name: str,
        toolset: str,
        schema: dict[str, Any],
        handler: Callable[..., Any],
        *,
        override: bool = False,
        **kwargs: Any,
    ) -> bool:
        """Register a plugin tool (origin ``plugin``).

        Replacing an existing tool of another toolset needs ``override=True`` and the
        operator setting ``allow_tool_override``; otherwise ``PermissionError``.
        """
        ok = self.registry.register(
            name, toolset, schema, handler, override=override, origin="plugin", **kwargs
        )
        if ok:
            self.tools.append(name)
        return ok

    def register_hook(self, name: str, fn: Hook) -> None:
        self.hooks.register_hook(name, fn)


def _call_factory(ctx_factory: Callable[..., PluginContext], name: str) -> PluginContext:
    try:
        params = inspect.signature(ctx_factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    ctx = ctx_factory(name) if params else ctx_factory()
    if not ctx.plugin_name:
        ctx.plugin_name = name
    return ctx


def _register_target(obj: Any) -> Callable[[PluginContext], Any]:
    register = getattr(obj, "register", None)
    if callable(register):
        return register  # type: ignore[no-any-return]
    if callable(obj) and not inspect.ismodule(obj):
        return obj  # type: ignore[no-any-return]
    raise TypeError("plugin has no register(ctx) function")


def _load_file(path: Path) -> Any:
    """Import a plugin file or package directory under a private module name."""
    target = path / "__init__.py" if path.is_dir() else path
    tag = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
    mod_name = f"mcp_hub_plugins_{tag}_{path.stem}"
    return import_file(mod_name, target, package_dir=path if path.is_dir() else None)


def _dir_candidates(plugin_dirs: Iterable[Path]) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for directory in plugin_dirs:
        directory = Path(directory)
        if not directory.is_dir():
            logger.warning("plugins directory %s does not exist; skipped", directory)
            continue
        for path in sorted(directory.iterdir()):
            if path.name.startswith(("_", ".")):
                continue
            if (path.suffix == ".py" and path.is_file()) or (path / "__init__.py").is_file():
                found.append((path.stem, path))
    return found


def load_plugins(
    ctx_factory: Callable[..., PluginContext],
    plugin_dirs: list[Path],
    entry_point_group: str = "mcp_hub.plugins",
) -> list[str]:
    """Load plugins from the entry-point group, then from ``plugin_dirs``.

    ``ctx_factory(plugin_name)`` (or ``ctx_factory()``) builds each plugin's
    context. A plugin that fails to import or register is logged as a warning and
    the others still load. Returns the names of the plugins loaded; a name seen
    twice is loaded once.
    """
    loaded: list[str] = []

    def run(name: str, load: Callable[[], Any]) -> None:
        if name in loaded:
            logger.warning("plugin %s already loaded; duplicate skipped", name)
            return
        try:
            register = _register_target(load())
            register(_call_factory(ctx_factory, name))
        except Exception as exc:
            logger.warning("plugin %s failed to load: %s: %s", name, type(exc).__name__, exc)
            return
        loaded.append(name)
        logger.info("plugin %s loaded", name)

    for ep in entry_points(group=entry_point_group):
        run(ep.name, ep.load)
    for name, path in _dir_candidates(plugin_dirs):
        run(name, functools.partial(_load_file, path))
    return loaded
