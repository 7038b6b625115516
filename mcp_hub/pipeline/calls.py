"""The call pipeline: everything between ``tools/call`` and a tool's handler.

Order (docs/tools.md, "The call pipeline"):

0. a profile's tool rewrites (``rewrite``, mcp_hub/rewrite/profiles.py) turn the
   caller's name and arguments into the server-level ones, or refuse the call;
1. coerce the top-level arguments against the tool's input schema;
2. bridge tools (``tool_search``/``tool_describe``/``tool_call``) are handed to
   the bridge, which may re-enter this pipeline for the real tool;
3. unknown tool → :class:`~mcp_hub.errors.UnknownToolError` (-32602) with close
   names; arguments that violate the input schema → an ``isError`` result naming
   each bad field;
4. ``pre_tool_call`` hooks (block or modify);
5. :meth:`ToolRegistry.dispatch`;
6. ``post_tool_call`` and ``transform_tool_result`` hooks;
7. the size cap on text content.

The hot path is lean: compiled validators are cached per tool entry, arguments
are never deep-copied, hooks cost nothing when none are registered.
"""

from __future__ import annotations

import difflib
import logging
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from jsonschema.validators import validator_for
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent

from mcp_hub.errors import UnknownToolError, did_you_mean
from mcp_hub.pipeline.coerce import coerce_tool_args
from mcp_hub.pipeline.hooks import HookManager, HookStatus
from mcp_hub.pipeline.quick_schema import quick_check
from mcp_hub.registry.tool_registry import ToolEntry, ToolRegistry, input_schema_of
from mcp_hub.registry.tool_registry import registry as default_registry

__all__ = [
    "DEFAULT_MAX_RESULT_SIZE_CHARS",
    "Bridge",
    "Reenter",
    "cap_result",
    "handle_function_call",
    "handle_unlisted_call",
    "says_unknown_tool",
    "unknown_tool",
    "validate_args",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RESULT_SIZE_CHARS = 100_000
_MAX_REPORTED_ERRORS = 20
_MAX_ERROR_MESSAGE = 300


class Reenter(Protocol):
    def __call__(
        self, real_name: str, real_args: dict[str, Any], **context: Any
    ) -> Awaitable[CallToolResult]: ...


#: A profile's rewrite step: the server-level (name, arguments), or the call's refusal.
Rewrite = Callable[[str, dict[str, Any]], "tuple[str, dict[str, Any]] | CallToolResult"]


class Bridge(Protocol):
    """The progressive-disclosure bridge (tool_search and friends)."""

    def handles(self, name: str) -> bool: ...

    async def handle(
        self, name: str, args: dict[str, Any], reenter: Reenter, **context: Any
    ) -> CallToolResult: ...


# ── validation ────────────────────────────────────────────────────────────────

# Per registry: tool name → (the entry it was compiled for, validator or None, quick check).
_validators: weakref.WeakKeyDictionary[ToolRegistry, dict[str, tuple[ToolEntry, Any, Any]]] = (
    weakref.WeakKeyDictionary()
)


def _validator(reg: ToolRegistry, entry: ToolEntry) -> tuple[Any, Any]:
    """The compiled validator for ``entry`` and its quick check (:mod:`mcp_hub.pipeline.quick_schema`),
    recompiled when the entry is replaced."""
    per_registry = _validators.get(reg)
    if per_registry is None:
        per_registry = _validators.setdefault(reg, {})
    cached = per_registry.get(entry.name)
    if cached is not None and cached[0] is entry:
        return cached[1], cached[2]
    schema = input_schema_of(entry.schema)
    validator: Any = None
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except Exception as exc:
        # A broken upstream schema must not make the tool uncallable: skip validation.
        logger.warning("tool %s: input schema is invalid, arguments not validated: %s",
                       entry.name, getattr(exc, "message", exc))
    if len(per_registry) > 50_000:
        per_registry.clear()
    quick = quick_check(schema) if validator is not None else None
    per_registry[entry.name] = (entry, validator, quick)
    return validator, quick


def _field(error: Any) -> str:
    path = "".join(
        f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
        for i, p in enumerate(error.absolute_path)
    )
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [p for p in error.validator_value if p not in error.instance]
        if missing:
            return f"{path}.{missing[0]}" if path else str(missing[0])
    return path or "(arguments)"


def validate_args(reg: ToolRegistry, entry: ToolEntry, args: Any) -> list[str]:
    """``"field: message"`` for each schema violation of ``args`` (empty when valid)."""
    validator, quick = _validator(reg, entry)
    if validator is None or (quick is not None and quick(args)):
        return []
    try:
        if validator.is_valid(args):
            return []
        errors = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.path)))
    except Exception as exc:  # e.g. an invalid regex inside the schema
        logger.warning("tool %s: validation failed internally, skipped: %s", entry.name, exc)
        return []
    problems = []
    for error in errors[:_MAX_REPORTED_ERRORS]:
        message = error.message
        if len(message) > _MAX_ERROR_MESSAGE:
            message = message[: _MAX_ERROR_MESSAGE - 1] + "…"
        problems.append(f"{_field(error)}: {message}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        problems.append(f"… and {len(errors) - _MAX_REPORTED_ERRORS} more")
    return problems


# ── size cap ──────────────────────────────────────────────────────────────────


def _truncate(text: str, budget: int) -> str:
    cut = len(text) - budget
    head = budget - budget // 2
    tail = budget // 2
    return f"{text[:head]}\n…[truncated {cut} chars]…\n{text[len(text) - tail:] if tail else ''}"


def cap_result(result: CallToolResult, limit: int) -> CallToolResult:
    """Cap the total text content at ``limit`` chars, keeping head and tail of each text.

    Over the limit, each text block keeps a share of the budget proportional to
    its size. Other content (images, resources) and structuredContent are untouched.
    """
    total = 0
    for block in result.content:
        if isinstance(block, TextContent):
            total += len(block.text)
    if total <= limit:
        return result
    content: list[Any] = []
    for block in result.content:
        if isinstance(block, TextContent) and block.text:
            budget = max(limit * len(block.text) // total, 0)
            if budget < len(block.text):
                block = block.model_copy(update={"text": _truncate(block.text, budget)})
        content.append(block)
    return result.model_copy(update={"content": content})


# ── the pipeline ──────────────────────────────────────────────────────────────


def unknown_tool(
    name: str, registry: ToolRegistry, allow: Callable[[str], bool] | None = None
) -> UnknownToolError:
    """The "Unknown tool" error; its suggestions come only from names ``allow`` admits,
    so a name hidden from the caller reads exactly like a name that does not exist."""
    names = registry.names()
    if allow is not None:
        names = [n for n in names if allow(n)]
    return UnknownToolError(name, difflib.get_close_matches(name, names, n=3))


def _error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


async def handle_function_call(
    name: str,
    args: dict[str, Any] | None,
    *,
    registry: ToolRegistry | None = None,
    hooks: HookManager | None = None,
    bridge: Bridge | None = None,
    max_result_size_chars: int = DEFAULT_MAX_RESULT_SIZE_CHARS,
    allow: Callable[[str], bool] | None = None,
    rewrite: Rewrite | None = None,
    **context: Any,
) -> CallToolResult:
    """Run one tool call through the whole pipeline; always a ``CallToolResult``.

    Raises :class:`UnknownToolError` for a name the registry does not hold, or
    that ``allow`` (the caller's access policy) refuses: the bridge's ``tool_call``
    re-enters with the same ``allow``, so it reaches nothing the caller cannot.
    ``context`` (the hub passes ``call=CallContext``) reaches hooks and handler.
    """
    reg = default_registry if registry is None else registry
    if args is None:
        args = {}
    bridged = bridge is not None and bridge.handles(name)
    # An unknown or refused tool is named as the caller asked for it: a profile's
    # rewrite must not give away the server-level name behind its own.
    asked = name
    if rewrite is not None and not bridged:
        rewritten = rewrite(name, args)
        if isinstance(rewritten, CallToolResult):
            return rewritten
        name, args = rewritten
    if not bridged and allow is not None and not allow(name):
        raise unknown_tool(asked, reg, allow)

    # 1. coercion
    args = coerce_tool_args(name, args, registry=reg)

    # 2. bridge tools
    if bridged:
        assert bridge is not None
        return await _bridged_call(name, args, bridge, reg, hooks, max_result_size_chars,
                                   allow, rewrite, context)

    # 3. unknown tool, validation
    entry = reg.get_entry(name)
    if entry is None:
        raise unknown_tool(asked, reg, allow)
    invalid = _invalid_args(reg, entry, name, args)
    if invalid is not None:
        return invalid

    # 4.–6. pre hooks, dispatch, post and transform hooks
    result = await _dispatch_with_hooks(reg, hooks, name, args, context)

    # 7. size cap
    limit = entry.max_result_size_chars or max_result_size_chars
    return cap_result(result, limit)


async def _bridged_call(
    name: str, args: dict[str, Any], bridge: Bridge, reg: ToolRegistry, hooks: HookManager | None,
    max_result_size_chars: int, allow: Callable[[str], bool] | None, rewrite: Rewrite | None,
    context: dict[str, Any],
) -> CallToolResult:
    """A bridge tool (``tool_search``/``tool_call``); ``tool_call`` re-enters the pipeline."""

    async def reenter(real_name: str, real_args: dict[str, Any], **ctx: Any) -> CallToolResult:
        # No bridge on re-entry: tool_call cannot call itself recursively.
        return await handle_function_call(
            real_name, real_args, registry=reg, hooks=hooks,
            max_result_size_chars=max_result_size_chars, allow=allow, rewrite=rewrite,
            **(ctx or context),
        )

    result = await bridge.handle(name, args, reenter, **context)
    return cap_result(result, max_result_size_chars)


def _invalid_args(reg: ToolRegistry, entry: ToolEntry, name: str, args: Any) -> CallToolResult | None:
    """The error result for arguments that are not an object or fail the schema, else None."""
    if not isinstance(args, dict):
        return _error_result(
            f"Invalid arguments for tool {name}: arguments must be a JSON object, "
            f"not {type(args).__name__}"
        )
    problems = validate_args(reg, entry, args)
    if problems:
        return _error_result(
            f"Invalid arguments for tool {name}:\n" + "\n".join(f"- {p}" for p in problems)
        )
    return None


def _hook_span(context: dict[str, Any], hook: str) -> AbstractContextManager[Any]:
    """A span around a hook when the call is traced (``call.trace``, mcp_hub.telemetry)."""
    trace = getattr(context.get("call"), "trace", None)
    return trace.hook(hook) if trace is not None else nullcontext()


async def handle_unlisted_call(
    name: str, args: dict[str, Any], run: Callable[[dict[str, Any]], Awaitable[CallToolResult]],
    *, registry: ToolRegistry, hooks: HookManager | None, max_result_size_chars: int,
    suggestions: Sequence[str] = (), **context: Any,
) -> CallToolResult:
    """A call of a tool the registry does not list, which ``run`` passes to its server
    (the hub decides when: docs/upstreams.md, "Unlisted tools"). Hooks and the size cap
    apply as to any call; there is no schema to coerce or validate against.

    When the server answers that it has no such tool (an error result or a JSON-RPC
    error saying so), the hub's own ``suggestions`` of close names are added to its
    answer, which is otherwise kept as sent; any other answer is left alone."""
    if not isinstance(args, dict):
        return _error_result(
            f"Invalid arguments for tool {name}: arguments must be a JSON object, "
            f"not {type(args).__name__}")
    try:
        result = await _dispatch_with_hooks(registry, hooks, name, args, context, run=run)
    except MCPError as exc:
        if suggestions and says_unknown_tool(exc.error.message):
            raise MCPError(exc.error.code, f"{exc.error.message} {did_you_mean(suggestions)}",
                           exc.error.data) from exc
        raise
    result = cap_result(result, max_result_size_chars)
    if suggestions and result.is_error and says_unknown_tool(_text_of(result)):
        extra = TextContent(text=did_you_mean(suggestions))
        result = result.model_copy(update={"content": [*result.content, extra]})
    return result


#: How servers say they have no tool of that name ("Unknown tool: x", "Tool x not found").
_UNKNOWN_TOOL = re.compile(
    r"\b(?:unknown|no such|unrecognized|undefined) tool\b"
    r"|\btool\b[^\n]{0,200}?\b(?:not found|does not exist|doesn't exist|is not known)\b",
    re.IGNORECASE)


def says_unknown_tool(text: str) -> bool:
    """Whether a server's error text says it has no such tool."""
    return _UNKNOWN_TOOL.search(text[:2000]) is not None


def _text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


async def _dispatch_with_hooks(
    reg: ToolRegistry, hooks: HookManager | None, name: str, args: dict[str, Any],
    context: dict[str, Any],
    run: Callable[[dict[str, Any]], Awaitable[CallToolResult]] | None = None,
) -> CallToolResult:
    """Pre hooks (which may block or rewrite), the handler (``run`` if given, else the
    registry's), then post and transform hooks."""
    if hooks is not None and hooks.has("pre_tool_call"):
        with _hook_span(context, "pre_tool_call"):
            outcome = await hooks.run_pre(name, args, **context)
        args = outcome.args
        if outcome.blocked is not None:
            result = _error_result(outcome.blocked)
            if hooks.has("post_tool_call"):
                await hooks.run_post(name, args, result, 0.0, "blocked", **context)
            return result
    started = time.perf_counter()
    result = await (reg.dispatch(name, args, **context) if run is None else run(args))
    if hooks is not None:
        if hooks.has("post_tool_call"):
            status: HookStatus = "error" if result.is_error else "ok"
            duration_ms = (time.perf_counter() - started) * 1000.0
            with _hook_span(context, "post_tool_call"):
                await hooks.run_post(name, args, result, duration_ms, status, **context)
        if hooks.has("transform_tool_result"):
            with _hook_span(context, "transform_tool_result"):
                result = await hooks.run_transform(name, args, result, **context)
    return result
