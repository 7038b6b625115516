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
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp.types import CallToolResult

from mcp_hub.registry import ToolRegistry, normalize_result

__all__ = [
    "HOOK_NAMES",
    "HookManager",
    "HookStatus",
    "PluginContext",
    "PreHookOutcome",
    "load_plugins",
]

logger = logging.getLogger(__name__)

HOOK_NAMES = frozenset({"pre_tool_call", "post_tool_call", "transform_tool_result"})
HookStatus = Literal["ok", "error", "blocked"]
Hook = Callable[..., Any]
DEFAULT_HOOK_TIMEOUT = 5.0


@dataclass(slots=True)
class PreHookOutcome:
    """What the pre hooks decided: ``blocked`` is the block message, or None to proceed."""

    blocked: str | None
    args: dict[str, Any]


def _hook_name(fn: Hook) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class HookManager:
    """The registered hooks, run in registration order."""

    def __init__(self, timeout: float = DEFAULT_HOOK_TIMEOUT) -> None:
        self.timeout = timeout
        self._hooks: dict[str, list[Hook]] = {name: [] for name in HOOK_NAMES}

    def register_hook(self, name: str, fn: Hook) -> None:
        if name not in HOOK_NAMES:
            raise ValueError(f"unknown hook {name!r}; expected one of {sorted(HOOK_NAMES)}")
        if not callable(fn):
            raise ValueError(f"hook {name!r}: {fn!r} is not callable")
        self._hooks[name].append(fn)

    def has(self, name: str) -> bool:
        """Whether any hook is registered under ``name`` (the pipeline's fast path)."""
        return bool(self._hooks.get(name))

    def hooks(self, name: str) -> list[Hook]:
        return list(self._hooks.get(name, ()))

    async def _call(self, fn: Hook, **kwargs: Any) -> Any:
        with anyio.fail_after(self.timeout):
            if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
                getattr(fn, "__call__", None)  # noqa: B004
            ):
                return await fn(**kwargs)
            value = await anyio.to_thread.run_sync(
                functools.partial(fn, **kwargs), abandon_on_cancel=True
            )
            if inspect.isawaitable(value):
                value = await value
            return value

    async def run_pre(self, tool: str, args: dict[str, Any], **ctx: Any) -> PreHookOutcome:
        """Run pre hooks in order; the first block wins, modifications chain."""
        for fn in self._hooks["pre_tool_call"]:
            try:
                value = await self._call(fn, tool=tool, args=args, **ctx)
            except TimeoutError:
                logger.warning("pre_tool_call hook %s timed out on %s", _hook_name(fn), tool)
                return PreHookOutcome(
                    f"Blocked: the pre_tool_call hook {_hook_name(fn)} timed out "
                    f"after {self.timeout:g} s", args)
            except Exception as exc:
                logger.warning("pre_tool_call hook %s failed on %s: %s", _hook_name(fn), tool, exc)
                return PreHookOutcome(
                    f"Blocked: the pre_tool_call hook {_hook_name(fn)} failed "
                    f"({type(exc).__name__}: {exc})", args)
            if value is None:
                continue
            if isinstance(value, PreHookOutcome):
                if value.blocked is not None:
                    return value
                args = value.args
            elif isinstance(value, str):
                return PreHookOutcome(value, args)
            elif isinstance(value, dict):
                args = value
            else:
                logger.warning("pre_tool_call hook %s returned %s; ignored",
                               _hook_name(fn), type(value).__name__)
        return PreHookOutcome(None, args)

    async def run_post(
        self,
        tool: str,
        args: dict[str, Any],
        result: CallToolResult,
        duration_ms: float,
        status: HookStatus,
        **ctx: Any,
    ) -> None:
        """Run every post hook; failures are logged and skipped."""
        for fn in self._hooks["post_tool_call"]:
            try:
                await self._call(fn, tool=tool, args=args, result=result,
                                 duration_ms=duration_ms, status=status, **ctx)
            except Exception as exc:  # TimeoutError included
                logger.warning("post_tool_call hook %s failed on %s: %s",
                               _hook_name(fn), tool, exc)

    async def run_transform(
        self, tool: str, args: dict[str, Any], result: CallToolResult, **ctx: Any
    ) -> CallToolResult:
        """The first transform hook returning a replacement wins; None passes."""
        for fn in self._hooks["transform_tool_result"]:
            try:
                value = await self._call(fn, tool=tool, args=args, result=result, **ctx)
            except Exception as exc:
                logger.warning("transform_tool_result hook %s failed on %s: %s",
                               _hook_name(fn), tool, exc)
                continue
            if value is not None:
                return normalize_result(value)
        return result


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
    spec = importlib.util.spec_from_file_location(
        mod_name, target, submodule_search_locations=[str(path)] if path.is_dir() else None
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {target}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


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
