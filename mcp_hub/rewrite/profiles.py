"""A profile's tool rewrites: ``[profiles.P.tools.EXPOSED]``, on top of the server's.

The Hub keeps one :class:`ProfileRewrites` per profile (and config). It rewrites
the definitions the profile's callers are shown (``tools/list``, the bridge's
catalog, so ``tool_search`` ranks on the rewritten text and ``tool_describe``
shows it) and turns a call of the profile's view back into the server-level one
(:meth:`ProfileRewrites.translate`) before access rules, validation and dispatch
see it; the server-level rewrite then turns that into the upstream's own call.

A caller's profiles are the endpoint's and its identity's ``[[access]]`` rule's
(:meth:`mcp_hub.hub.access.AccessControl.profiles`); when they are two, their rules
are :func:`stacked` into one table, the rule's on top.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from mcp_hub.errors import UnknownToolError
from mcp_hub.rewrite.settings import ToolRewrite
from mcp_hub.rewrite.tool import ArgumentPlan, Refused, rewrite_definition

__all__ = ["ProfileRewrites", "Translate", "stacked"]

#: ``(name, args) → (name, args)`` as the pipeline knows them, or the call's refusal.
Translate = Callable[[str, dict[str, Any]], "tuple[str, dict[str, Any]] | CallToolResult"]


def stacked(layers: Iterable[Mapping[str, ToolRewrite]]) -> dict[str, ToolRewrite]:
    """One table of the rules of several profiles, each layer on top of the ones before.

    For a tool two layers rewrite, the upper layer's keys win one by one (an
    argument's rule as a whole), and a tool either layer hides is hidden.
    """
    out: dict[str, ToolRewrite] = {}
    for layer in layers:
        for name, upper in layer.items():
            lower = out.get(name)
            out[name] = upper if lower is None else _over(lower, upper)
    return out


def _over(lower: ToolRewrite, upper: ToolRewrite) -> ToolRewrite:
    merged = {**lower.model_dump(exclude_defaults=True), **upper.model_dump(exclude_defaults=True)}
    merged["hide"] = lower.hide or upper.hide
    merged["arguments"] = {**lower.arguments, **upper.arguments}
    return ToolRewrite.model_validate(merged)


class ProfileRewrites:
    """One profile's rules, keyed by the (server-level) exposed name."""

    __slots__ = ("hidden", "plans", "renamed", "rules", "secrets")

    def __init__(self, rules: Mapping[str, ToolRewrite], secrets: Iterable[str] = ()) -> None:
        self.rules = dict(rules)
        self.secrets = tuple(secrets)
        #: The profile's name → the server-level exposed name.
        self.renamed = {r.name: n for n, r in rules.items() if r.name and r.name != n}
        #: Names a caller of this profile cannot call: hidden, or renamed away.
        self.hidden = frozenset(n for n, r in rules.items()
                                if r.hide or (r.name and r.name != n)) - set(self.renamed)
        self.plans = {n: p for n, r in rules.items()
                      if (p := ArgumentPlan.of(r.name or n, r)) is not None}

    def definitions(self, defs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``defs`` as this profile's callers see them (hidden tools left out)."""
        rules = self.rules
        out: list[dict[str, Any]] = []
        for d in defs:
            rule = rules.get(d["name"])
            if rule is None:
                out.append(d)
            elif not rule.hide:
                new = rewrite_definition(d, rule, self.secrets)
                if rule.name:
                    new["name"] = rule.name
                out.append(new)
        return out

    def names(self, table: Mapping[str, str]) -> dict[str, str]:
        """A name → value table (origins, servers) that knows the profile's new names too."""
        out = dict(table)
        for new, old in self.renamed.items():
            if old in table:
                out[new] = table[old]
        return out

    def upstream_name(self, name: str) -> str:
        """The server-level exposed name of the profile's ``name``."""
        return self.renamed.get(name, name)

    def profile_name(self, name: str) -> str:
        """The name a caller of this profile asked for, from the name an unknown-tool error
        names: a hidden name as it is, a server-level name by the profile's name for it."""
        if name in self.hidden:
            return name
        return next((new for new, old in self.renamed.items() if old == name), name)

    def translator(self, claims: Callable[[], Mapping[str, str]]) -> Translate:
        """The pipeline's ``rewrite`` step for one call (``claims``: the caller's, when needed)."""
        def translate(name: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]] | CallToolResult:
            if name in self.hidden:
                raise UnknownToolError(name, [])
            real = self.renamed.get(name, name)
            plan = self.plans.get(real)
            if plan is None:
                return real, args
            try:
                return real, plan.apply(args, claims() if plan.templated else {})
            except Refused as exc:
                return CallToolResult(content=[TextContent(text=str(exc))], is_error=True)
        return translate
