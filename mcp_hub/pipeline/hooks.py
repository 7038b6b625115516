"""Hooks on the call pipeline: ``pre_tool_call``, ``post_tool_call``, ``transform_tool_result``.

Plugins attach them (:mod:`mcp_hub.plugins`); the pipeline runs them
(:mod:`mcp_hub.pipeline.calls`). Hooks are called with keyword arguments, sync or
async (sync ones in a worker thread), each bounded by a timeout (default 5 s):
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
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp.types import CallToolResult

from mcp_hub.registry.results import normalize_result

__all__ = ["DEFAULT_HOOK_TIMEOUT", "HOOK_NAMES", "Hook", "HookManager", "HookStatus",
           "PreHookOutcome"]

logger = logging.getLogger("mcp_hub.plugins")

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
