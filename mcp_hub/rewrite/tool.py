"""Rewriting one tool: its definition (what clients see) and its arguments (what the upstream gets).

A rule (:class:`~mcp_hub.rewrite.settings.ToolRewrite`) is applied in two places:

* :func:`rewrite_definition` turns a definition into the one clients see: a new
  title, description and annotations, and an input schema with arguments renamed,
  re-described, given a default, or removed (``fixed``, ``hide``). ``outputSchema``
  is left as it is: structured output passes through unchanged.
* :class:`ArgumentPlan` turns the arguments a client sent (named as the client
  sees them) back into the upstream's own: a renamed argument gets its own name
  again, a default fills in what the client left out, a fixed value is set. A
  client value for a fixed or hidden argument is refused (:class:`Refused`),
  never forwarded.

A ``fixed`` or ``default`` value may hold ``{identity.sub}``, ``{identity.email}``
or ``{identity.name}``: the signed-in caller's claim, filled in per call. A claim
the caller does not have refuses the call. A value interpolated from the
environment (``${VAR}``) is a secret: it never appears in a schema.

Server-level rules (keyed by the upstream's tool name) apply first, when the
upstream's listing is registered; a profile's rules (keyed by the exposed name)
apply on top, for that profile's callers only (:mod:`mcp_hub.rewrite.profiles`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolResult, TextContent

from mcp_hub.rewrite.settings import ToolRewrite

__all__ = ["ArgumentPlan", "Refused", "applied", "has_template", "is_secret",
           "rewrite_definition", "with_plan"]

_TEMPLATE = re.compile(r"\{identity\.([A-Za-z_]+)\}")
#: The claims a template may name.
CLAIMS = ("sub", "email", "name")


class Refused(Exception):
    """A call the rewrite refuses: the message is the ``isError`` result's text."""


def has_template(value: Any) -> bool:
    """Whether ``value`` (a string, or lists and tables of them) names an identity claim."""
    if isinstance(value, str):
        return _TEMPLATE.search(value) is not None
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    return False


def is_secret(value: Any, secrets: Iterable[str]) -> bool:
    """Whether ``value`` holds a value interpolated from the environment."""
    text = json.dumps(value) if not isinstance(value, str) else value
    return any(s and s in text for s in secrets)


def _fill(value: Any, claims: Mapping[str, str], tool: str, arg: str) -> Any:
    """``value`` with each ``{identity.X}`` replaced by the caller's claim X."""
    if isinstance(value, str):
        def claim(match: re.Match[str]) -> str:
            found = claims.get(match.group(1))
            if found is None:
                raise Refused(
                    f"Tool {tool}: argument '{arg}' is filled in from the caller's identity "
                    f"claim '{match.group(1)}', which this caller does not have; sign in with "
                    f"an identity that has it")
            return found
        return _TEMPLATE.sub(claim, value)
    if isinstance(value, list):
        return [_fill(v, claims, tool, arg) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, claims, tool, arg) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class ArgumentPlan:
    """How one rewrite turns a client's arguments into the upstream's (see the module doc).

    ``renames`` maps the client's name to the upstream's; ``refused`` are names a
    client may not send; ``fixed`` and ``defaults`` are keyed by the upstream's names.
    """

    tool: str
    renames: Mapping[str, str]
    refused: frozenset[str]
    fixed: Mapping[str, Any]
    defaults: Mapping[str, Any]
    templated: bool

    @staticmethod
    def of(tool: str, rule: ToolRewrite | None) -> ArgumentPlan | None:
        """The plan of ``rule`` for exposed tool ``tool``; None when it changes no argument."""
        if rule is None:
            return None
        renames: dict[str, str] = {}
        refused: set[str] = set()
        fixed: dict[str, Any] = {}
        defaults: dict[str, Any] = {}
        for name, arg in rule.arguments.items():
            if arg.fixed is not None:
                fixed[name] = arg.fixed
                refused.add(name)
                continue
            if arg.hide:
                refused.add(name)
            elif arg.rename is not None and arg.rename != name:
                renames[arg.rename] = name
                refused.add(name)
            if arg.default is not None:
                defaults[name] = arg.default
        if not (renames or refused or fixed or defaults):
            return None
        refused -= set(renames)
        templated = has_template(list(fixed.values())) or has_template(list(defaults.values()))
        return ArgumentPlan(tool, renames, frozenset(refused), fixed, defaults, templated)

    def apply(self, args: Mapping[str, Any] | None, claims: Mapping[str, str]) -> dict[str, Any]:
        """The upstream's arguments for a client's ``args``; raises :class:`Refused`."""
        out: dict[str, Any] = {}
        renames = self.renames
        for key, value in (args or {}).items():
            if key in self.refused:
                raise Refused(self._refusal(key))
            out[renames.get(key, key)] = value
        for key, value in self.defaults.items():
            if key not in out:
                out[key] = _fill(value, claims, self.tool, key) if self.templated else value
        for key, value in self.fixed.items():
            out[key] = _fill(value, claims, self.tool, key) if self.templated else value
        return out

    def _refusal(self, key: str) -> str:
        if key in self.fixed:
            return (f"Tool {self.tool}: argument '{key}' is set by the hub and cannot be "
                    "given; leave it out")
        for client, upstream in self.renames.items():
            if upstream == key:
                return f"Tool {self.tool}: unknown argument '{key}' (it is called '{client}')"
        return f"Tool {self.tool}: unknown argument '{key}'"


def rewrite_definition(definition: Mapping[str, Any], rule: ToolRewrite,
                       secrets: Iterable[str] = ()) -> dict[str, Any]:
    """``definition`` (an MCP tool definition) as ``rule`` shows it; the name is left to the caller.

    The input is not changed. ``secrets`` are the values interpolated from the
    environment: a default holding one is filled in but not shown.
    """
    out = dict(definition)
    if rule.title is not None:
        out["title"] = rule.title
    if rule.description is not None:
        out["description"] = rule.description
    if rule.annotations is not None:
        current = out.get("annotations")
        out["annotations"] = {**(current if isinstance(current, dict) else {}),
                              **rule.annotations}
    if rule.arguments and isinstance(out.get("inputSchema"), dict):
        out["inputSchema"] = _rewrite_schema(out["inputSchema"], rule, tuple(secrets))
    return out


def _rewrite_schema(schema: Mapping[str, Any], rule: ToolRewrite,
                    secrets: tuple[str, ...]) -> dict[str, Any]:
    """The input schema with the rule's arguments renamed, re-described, defaulted or removed."""
    out = dict(schema)
    props = dict(out.get("properties") or {})
    required = [r for r in out.get("required") or [] if isinstance(r, str)]
    order = list(props)
    for name, arg in rule.arguments.items():
        prop = dict(props.get(name) or {})
        if arg.fixed is not None or arg.hide:
            props.pop(name, None)
            required = [r for r in required if r != name]
            continue
        if arg.description is not None:
            prop["description"] = arg.description
        if arg.default is not None:
            if has_template(arg.default) or is_secret(arg.default, secrets):
                prop.pop("default", None)
            else:
                prop["default"] = arg.default
            required = [r for r in required if r != name]
        target = arg.rename or name
        if target != name:
            props.pop(name, None)
            order = [target if n == name else n for n in order]
            required = [target if r == name else r for r in required]
        if name in order or target in order:
            props[target] = prop
    out["properties"] = {n: props[n] for n in order if n in props}
    if required or "required" in schema:
        out["required"] = required
    return out


def applied(rule: ToolRewrite, secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The keys ``rule`` sets, as the config says them, with secret values redacted."""
    keep = tuple(secrets)
    data = rule.model_dump(exclude_defaults=True, mode="json")
    for arg in data.get("arguments", {}).values():
        for key in ("fixed", "default"):
            if key in arg and is_secret(arg[key], keep):
                arg[key] = "[REDACTED]"
    return data


Handler = Callable[..., Awaitable[CallToolResult]]


def with_plan(handler: Handler, plan: ArgumentPlan | None) -> Handler:
    """``handler`` (``(args, *, call=None)`` → result) with ``plan`` applied to its arguments
    first; a refused call returns its ``isError`` result without calling ``handler``."""
    if plan is None:
        return handler

    async def rewritten(args: dict[str, Any] | None, *, call: Any = None,
                        **kwargs: Any) -> CallToolResult:
        try:
            claims = call.claims() if plan.templated and call is not None else {}
            upstream_args = plan.apply(args, claims)
        except Refused as exc:
            return CallToolResult(content=[TextContent(text=str(exc))], is_error=True)
        return await handler(upstream_args, call=call, **kwargs)

    rewritten.__name__ = getattr(handler, "__name__", "rewritten")
    return rewritten
