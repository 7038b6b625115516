"""The tool catalog of a per-user server, shared by every caller.

Rule: until someone has connected, the server lists one tool, ``PREFIX_connect``,
whose call starts the connect flow. Once any identity's session has listed the
upstream's tools, that listing (filtered by ``include``/``exclude``, named with
the server's prefix, rewritten by ``[servers.S.tools]``: docs/rewriting.md) is the
server's catalog for every caller, and the
placeholder goes. Tool definitions are not credentials; every call still runs
on the caller's own session, and a caller who has not connected gets the
connect elicitation from any of these tools. The newest listing wins.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Collection
from typing import Any

import mcp.types as types

from mcp_hub.config.model import HubSettings, ServerConfig
from mcp_hub.redact import known_secrets
from mcp_hub.registry.naming import exposed_name, upstream_toolset
from mcp_hub.registry.sanitize import clean_tool_definition
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.rewrite.tool import ArgumentPlan, rewrite_definition, with_plan

__all__ = ["CONNECT_TOOL", "PLACEHOLDER", "Handler", "PerUserCatalog"]

#: The raw name of the placeholder tool listed before anyone connected.
CONNECT_TOOL = "connect"
#: What the placeholder's handler is bound to (no upstream tool has an empty name).
PLACEHOLDER = ""
Handler = Callable[..., Awaitable[types.CallToolResult]]


def _matches(name: str, patterns: list[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


class PerUserCatalog:
    """The registered tools of one per-user server (see the module docstring)."""

    def __init__(self, name: str, config: ServerConfig, settings: HubSettings,
                 registry: ToolRegistry, handler: Callable[[str], Handler]) -> None:
        self.name = name
        self.config = config
        self.settings = settings
        self.registry = registry
        self.toolset = upstream_toolset(name)
        self._handler = handler
        self.exposed: dict[str, str] = {}  # exposed name -> raw name
        self.listed = False
        self._plans: dict[str, ArgumentPlan | None] = {}  # raw name -> its argument rewrite

    def _exposed(self, raw: str, siblings: Collection[str] = ()) -> str:
        return exposed_name(self.config.effective_prefix(self.name), raw,
                            self.settings.tool_name_separator, self.settings.max_tool_name_length,
                            dedupe=self.settings.dedupe_prefix, siblings=siblings)

    def _wanted(self, raw: str) -> bool:
        include, exclude = self.config.include, self.config.exclude
        if include and not _matches(raw, include):
            return False
        return not (exclude and _matches(raw, exclude))

    def register_placeholder(self) -> None:
        schema: dict[str, Any] = {
            "name": self._exposed(CONNECT_TOOL),
            "description": (f"Connect your {self.name} account to the hub. Nobody has connected "
                            f"yet, so {self.name}'s own tools are not known; after connecting, "
                            "they replace this tool."),
            "inputSchema": {"type": "object", "properties": {}},
        }
        self._replace({PLACEHOLDER: schema})

    def update(self, tools: list[types.Tool]) -> None:
        """Adopt a listing from some identity's session as the catalog."""
        defs: dict[str, dict[str, Any]] = {}
        plans: dict[str, ArgumentPlan | None] = {}
        siblings = {str(r.name) if (r := self.config.tools.get(t.name)) and r.name else t.name
                    for t in tools}
        for tool in sorted(tools, key=lambda t: t.name):
            rule = self.config.tools.get(tool.name)
            if not self._wanted(tool.name) or (rule is not None and rule.hide):
                continue
            raw_def = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            raw_def.pop("resultType", None)
            schema = clean_tool_definition(raw_def)
            if rule is not None:
                schema = rewrite_definition(schema, rule, known_secrets())
            schema["name"] = self._exposed(rule.name if rule and rule.name else tool.name,
                                           siblings)
            defs[tool.name] = schema
            plans[tool.name] = ArgumentPlan.of(schema["name"], rule)
        self.listed = True
        self._replace(defs, plans)

    def _replace(self, defs: dict[str, dict[str, Any]],
                 plans: dict[str, ArgumentPlan | None] | None = None) -> None:
        plans = plans or {}
        old_plans, self._plans = self._plans, plans
        wanted = {str(schema["name"]): raw for raw, schema in defs.items()}
        with self.registry.batch():
            for exposed in list(self.exposed):
                if exposed not in wanted:
                    self._deregister(exposed)
            for raw, schema in defs.items():
                exposed = str(schema["name"])
                old = self.registry.get_entry(exposed)
                if (old is not None and old.toolset == self.toolset and old.schema == schema
                        and old_plans.get(raw) == plans.get(raw)):
                    continue
                handler = with_plan(self._handler(raw), plans.get(raw))
                if self.registry.register(exposed, self.toolset, schema, handler,
                                          description=str(schema.get("description") or ""),
                                          origin="upstream"):
                    self.exposed[exposed] = raw

    def _deregister(self, exposed: str) -> None:
        entry = self.registry.get_entry(exposed)
        if entry is not None and entry.toolset == self.toolset:
            self.registry.deregister(exposed)
        self.exposed.pop(exposed, None)

    def clear(self) -> None:
        with self.registry.batch():
            for exposed in list(self.exposed):
                self._deregister(exposed)
