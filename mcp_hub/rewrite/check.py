"""Mistakes in tool rewrites, for ``mcp-hub check``.

Held against what the upstreams really list: a rewrite naming no tool or no
argument (with "did you mean"), two tools that end up with the same exposed name,
a hidden required argument that nothing fills in, and a ``rename`` onto a name the
tool already has. A server that is not connected is not judged (its listing is
unknown); :func:`problems` says nothing about it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from mcp_hub.registry.naming import exposed_name
from mcp_hub.rewrite.settings import ToolRewrite
from mcp_hub.rewrite.tool import rewrite_definition

__all__ = ["argument_problems", "problems"]


def _close(name: str, names: Iterable[str]) -> str:
    found = difflib.get_close_matches(name, list(names), n=1, cutoff=0.5)
    return f" (did you mean '{found[0]}'?)" if found else ""


def argument_problems(where: str, tool: str, schema: Mapping[str, Any], rule: ToolRewrite
                      ) -> list[str]:
    """What is wrong with ``rule``'s arguments for a tool with input ``schema``."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out: list[str] = []
    targets: dict[str, str] = {}
    for name, arg in rule.arguments.items():
        here = f"{where}.arguments.{name}"
        if name not in props:
            out.append(f"{here}: tool '{tool}' has no argument '{name}'{_close(name, props)}")
            continue
        if arg.hide and name in required and arg.default is None:
            out.append(f"{here}: '{name}' is required by '{tool}' and hidden, but nothing fills "
                       "it in: set 'fixed' or 'default'")
        target = arg.rename
        if target is None or target == name:
            continue
        renamed_away = target in rule.arguments and rule.arguments[target].rename not in (
            None, target)
        if (target in props and not renamed_away) or target in targets:
            other = targets.get(target, target)
            out.append(f"{here}: rename '{name}' to '{target}' clashes with the argument "
                       f"'{other}' of '{tool}'")
        targets[target] = name
    return out


def problems(servers: Mapping[str, Any], listings: Mapping[str, list[dict[str, Any]]],
             profiles: Mapping[str, Any], others: Mapping[str, str], separator: str,
             max_length: int, *, dedupe: bool = False) -> list[str]:
    """Every mistake in the rewrites of ``servers`` and ``profiles``.

    ``listings``: each connected server's tools as the upstream lists them;
    ``others``: names held by tools that are not an upstream's (builtins, plugins)
    → their toolset. Servers are ``ServerConfig``, profiles ``ProfileConfig``.
    """
    out: list[str] = []
    owners: dict[str, list[str]] = {}
    exposed_defs: dict[str, dict[str, Any]] = {}
    for server, listed in listings.items():
        config = servers[server]
        by_name = {str(t.get("name")): t for t in listed}
        for raw, rule in config.tools.items():
            if raw not in by_name:
                out.append(f"servers.{server}.tools.{raw}: server '{server}' lists no tool "
                           f"'{raw}'{_close(raw, by_name)}")
                continue
            schema = by_name[raw].get("inputSchema") or {}
            out += argument_problems(f"servers.{server}.tools.{raw}", raw, schema, rule)
        prefix = config.effective_prefix(server)
        siblings = {str(r.name) if (r := config.tools.get(n)) and r.name else n for n in by_name}
        for raw, tool in by_name.items():
            rule = config.tools.get(raw)
            if rule is not None and rule.hide:
                continue
            name = exposed_name(prefix, rule.name if rule and rule.name else raw, separator,
                                max_length, dedupe=dedupe, siblings=siblings)
            owners.setdefault(name, []).append(f"{server}/{raw}")
            exposed_defs[name] = rewrite_definition(tool, rule) if rule else tool
    for name, holders in owners.items():
        if len(holders) > 1 or name in others:
            held = holders + ([f"toolset {others[name]}"] if name in others else [])
            out.append(f"exposed name '{name}' is taken by more than one tool: "
                       f"{', '.join(held)}; give one of them another 'name'")
    for profile_name, profile in profiles.items():
        out += _profile_problems(profile_name, profile.tools, exposed_defs, owners)
    return out


def _profile_problems(profile: str, rules: Mapping[str, ToolRewrite],
                      defs: Mapping[str, dict[str, Any]], owners: Mapping[str, list[str]]
                      ) -> list[str]:
    out: list[str] = []
    renamed: dict[str, str] = {}
    for name, rule in rules.items():
        where = f"profiles.{profile}.tools.{name}"
        if name not in defs:
            out.append(f"{where}: no upstream tool is exposed as '{name}'{_close(name, defs)}")
            continue
        out += argument_problems(where, name, defs[name].get("inputSchema") or {}, rule)
        if rule.name and rule.name != name:
            if (rule.name in owners and rule.name not in rules) or rule.name in renamed:
                out.append(f"{where}: name '{rule.name}' is taken by another tool")
            renamed[rule.name] = name
    return out
