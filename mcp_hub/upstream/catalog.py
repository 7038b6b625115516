"""The catalog of one upstream: its tools, prompts, resources and their pins.

Listing (all pages), cleaning the human-facing text, diffing a new tool listing
against what is registered and (de)registering only the difference, and
checking the listing against the tool pins.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio.to_thread
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.apps import namespaced_tool_meta
from mcp_hub.redact import known_secrets
from mcp_hub.registry.naming import exposed_name
from mcp_hub.registry.sanitize import clean_description, clean_tool_definition
from mcp_hub.rewrite.tool import ArgumentPlan, Refused, rewrite_definition
from mcp_hub.upstream.conn_state import ConnectionState, Kind, ToolRecord
from mcp_hub.upstream.failures import error_text
from mcp_hub.upstream.list_hints import HintCollector
from mcp_hub.upstream.sessions.modern import is_modern

__all__ = ["Catalog"]

_MAX_PAGES = 1000


def _matches(name: str, patterns: list[str]) -> bool:
    return any(name == p or fnmatch.fnmatchcase(name, p) for p in patterns)


_ItemT = TypeVar("_ItemT", bound=BaseModel)


def _clean_item(item: _ItemT) -> _ItemT:
    """A prompt, resource or template with invisible characters removed from its
    human-facing text (description, title)."""
    update: dict[str, str] = {}
    for key in ("description", "title"):
        value = getattr(item, key, None)
        if isinstance(value, str) and value:
            cleaned = clean_description(value)
            if cleaned != value:
                update[key] = cleaned
    return item.model_copy(update=update) if update else item


def _clean_prompt(prompt: types.Prompt) -> types.Prompt:
    prompt = _clean_item(prompt)
    if prompt.arguments:
        args = [_clean_item(a) for a in prompt.arguments]
        if any(a is not b for a, b in zip(args, prompt.arguments, strict=True)):
            prompt = prompt.model_copy(update={"arguments": args})
    return prompt


#: ``call_tool(raw, args, call)``: the call path the registry's handlers forward to.
CallTool = Callable[[str, dict[str, Any] | None, CallContext | None],
                    Awaitable[types.CallToolResult]]


class Catalog:
    """Keeps this upstream's catalog and its registered tools current.

    One per connection, over its :class:`ConnectionState`; ``call_tool`` is what
    the handlers it registers call (:meth:`mcp_hub.upstream.calls.Calls.call_tool`).
    """

    __slots__ = ("call_tool", "shared")

    def __init__(self, shared: ConnectionState, call_tool: CallTool) -> None:
        self.shared = shared
        self.call_tool = call_tool

    async def _list_all(self, session: ClientSession, kind: str) -> list[Any]:
        shared = self.shared
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        hint = HintCollector(is_modern(session))
        for _ in range(_MAX_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page: Any
            if kind == "tools":
                page = await session.list_tools(params=params)
                items.extend(page.tools)
            elif kind == "prompts":
                page = await session.list_prompts(params=params)
                items.extend(page.prompts)
            elif kind == "resources":
                page = await session.list_resources(params=params)
                items.extend(page.resources)
            else:
                page = await session.list_resource_templates(params=params)
                items.extend(page.resource_templates)
            hint.page(page)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        hint.record(shared.list_hints, kind)
        return items

    async def sync(self, session: ClientSession, kinds: set[Kind], *, initial: bool = False,
                    announced: set[Kind] | frozenset[Kind] = frozenset()) -> None:
        """List ``kinds`` again and apply what changed. A kind in ``announced`` (the
        upstream said it changed) is announced to the hub's clients even when the new
        listing equals the old: the upstream's word is passed on, not second-guessed."""
        shared = self.shared
        changed: set[Kind] = set()
        if "tools" in kinds and shared.supports("tools"):
            shared.listed = await self._list_all(session, "tools")
            new, raw_defs = self._tool_records(shared.listed)
            blocked = await self._check_pins(raw_defs, new)
            if self._apply_tools(new, blocked):
                changed.add("tools")
                shared.hooks.changed(shared.name, "tools")
        if "prompts" in kinds and shared.supports("prompts"):
            prompts = [_clean_prompt(p) for p in await self._list_all(session, "prompts")]
            if prompts != shared.prompts:
                shared.prompts = prompts
                changed.add("prompts")
                shared.hooks.changed(shared.name, "prompts")
        if "resources" in kinds and shared.supports("resources"):
            await self._sync_resources(session, changed)
        for kind in sorted(announced & kinds - changed):
            if shared.supports(kind):
                shared.hooks.announced(shared.name, kind)

    async def _sync_resources(self, session: ClientSession, changed: set[Kind]) -> None:
        """List resources and templates again; add ``"resources"`` to ``changed`` if they did."""
        shared = self.shared
        resources = [_clean_item(r) for r in await self._list_all(session, "resources")]
        try:
            templates = [_clean_item(t) for t in await self._list_all(session, "templates")]
        except MCPError as exc:
            if exc.code != types.METHOD_NOT_FOUND:
                raise
            templates = []
        await shared.skills_probe.check(session, is_modern(session), shared.capabilities, resources,
                                      shared.config.connect_timeout)
        if resources != shared.resources or templates != shared.templates:
            shared.resources = resources
            shared.templates = templates
            changed.add("resources")
            shared.hooks.changed(shared.name, "resources")

    def clear(self) -> None:
        """The session is gone: take this server's tools out of the registry and forget
        every list (the next listing checks the pins again); the manager hears of each
        kind that had anything."""
        shared = self.shared
        had_tools = bool(shared.tools)
        had_prompts = bool(shared.prompts)
        had_resources = bool(shared.resources or shared.templates)
        if had_tools:
            removed = shared.registry.deregister_toolset(shared.toolset)
            shared.log.debug("upstream %s: deregistered %d tools", shared.name, len(removed))
        shared.tools = {}
        shared.exposed = {}
        shared.rejected = {}
        shared.pin_blocked = set()
        if shared.hooks.pins is not None:
            # Only the live view (blocked, flagged) is forgotten; pins and recorded
            # changes stay in the file, and the next listing checks again.
            shared.hooks.pins.forget_server(shared.name)
        shared.prompts = []
        shared.resources = []
        shared.templates = []
        shared.skills_probe.forget()
        if had_tools:
            shared.hooks.changed(shared.name, "tools")
        if had_prompts:
            shared.hooks.changed(shared.name, "prompts")
        if had_resources:
            shared.hooks.changed(shared.name, "resources")

    def takes_unlisted(self, raw: str) -> bool:
        """Whether a call of ``raw``, a tool this server does not list, may be passed to it:
        the server is exposed without a prefix (the name is its own) and connected,
        ``include``/``exclude`` admit the name, and no ``[servers.NAME.tools]`` rule and
        no pin names it (a hidden, renamed or blocked tool stays so)."""
        shared = self.shared
        return (shared.prefix == "" and shared.session is not None and raw not in shared.tools
                and raw not in shared.rejected and raw not in shared.config.tools
                and self._wanted(raw))

    def _wanted(self, raw: str) -> bool:
        shared = self.shared
        include, exclude = shared.config.include, shared.config.exclude
        if include and not _matches(raw, include):
            return False
        return not (exclude and _matches(raw, exclude))

    def _tool_records(self, tools: list[types.Tool]
                      ) -> tuple[dict[str, ToolRecord], dict[str, dict[str, Any]]]:
        """A listing's wanted tools as records, and the definitions as sent (for the pins)."""
        shared = self.shared
        sep = shared.settings.tool_name_separator
        max_len = shared.settings.max_tool_name_length
        new: dict[str, ToolRecord] = {}
        taken: dict[str, str] = {}
        raw_defs: dict[str, dict[str, Any]] = {}
        rules = shared.config.tools
        dedupe = shared.settings.dedupe_prefix
        siblings = {_wanted_name(t.name, rules) for t in tools} if dedupe else set()
        for tool in sorted(tools, key=lambda t: t.name):
            raw = tool.name
            rule = rules.get(raw)
            if not self._wanted(raw) or raw in new or (rule is not None and rule.hide):
                continue
            name = exposed_name(shared.prefix, _wanted_name(raw, rules), sep, max_len,
                                dedupe=dedupe, siblings=siblings)
            if name in taken:
                shared.log.warning("upstream %s: tools %r and %r both map to %r; keeping the first",
                               shared.name, taken[name], raw, name)
                continue
            taken[name] = raw
            # Pins fingerprint what the upstream sent; the model reads the cleaned copy.
            raw_def = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
            raw_def.pop("resultType", None)
            raw_defs[raw] = raw_def
            # An app's resource is listed under this server's namespace (mcp_hub.protocol.apps).
            schema = namespaced_tool_meta(shared.name, clean_tool_definition(raw_def))
            if rule is not None:
                schema = rewrite_definition(schema, rule, known_secrets())
            schema["name"] = name
            ann = tool.annotations
            # The retry after a lost connection trusts the upstream's own readOnlyHint.
            new[raw] = ToolRecord(raw, name, schema,
                                  bool(ann is not None and ann.read_only_hint),
                                  ArgumentPlan.of(name, rule))
        return new, raw_defs

    def _apply_tools(self, new: dict[str, ToolRecord], blocked: dict[str, str]) -> bool:
        """Diff the new listing against what is registered; (de)register only the difference."""
        shared = self.shared
        for raw in blocked:
            del new[raw]
        old = shared.tools
        removed = [r for r in old.values() if r.raw not in new or new[r.raw].exposed != r.exposed]
        changed = [r for r in new.values()
                   if r.raw not in old or old[r.raw].schema != r.schema
                   or old[r.raw].plan != r.plan or r.exposed in shared.rejected]
        if not removed and not changed:
            self._mark_blocked(blocked)
            return False
        registry = shared.registry
        with registry.batch():
            for rec in removed:
                entry = registry.get_entry(rec.exposed)
                if entry is not None and entry.toolset == shared.toolset:
                    registry.deregister(rec.exposed)
                shared.rejected.pop(rec.exposed, None)
            for rec in changed:
                self._register(rec)
        self._mark_blocked(blocked)
        shared.tools = new
        shared.exposed = {r.exposed: r.raw for r in new.values()}
        shared.log.info("upstream %s: %d tools (%d registered or updated, %d removed)", shared.name,
                    len(new), len(changed), len(removed))
        return True

    async def _check_pins(self, raw_defs: dict[str, dict[str, Any]],
                          records: dict[str, ToolRecord]) -> dict[str, str]:
        """Check this listing against the pins; the blocked tools (raw → exposed name).

        In a worker thread: fingerprinting every tool and writing the pin file (an
        ``fsync`` of the pins of the whole catalog, at every change of any upstream)
        would otherwise hold the event loop, and every call in flight, for as long.
        One connection syncs one listing at a time, so listings apply in order.
        """
        shared = self.shared
        pins = shared.hooks.pins
        if pins is None or not raw_defs:
            return {}
        try:
            verdicts = await anyio.to_thread.run_sync(pins.check_many, shared.name, raw_defs)
        except Exception as exc:  # a broken pin file must not take the server down
            shared.log.error("upstream %s: tool pins not checked: %s", shared.name, error_text(exc))
            return {}
        return {raw: records[raw].exposed for raw, verdict in verdicts.items()
                if verdict.blocked and raw in records}

    def _mark_blocked(self, blocked: dict[str, str]) -> None:
        """Show the tools hidden by their pins as rejected, with how to accept them."""
        shared = self.shared
        for exposed in shared.pin_blocked - set(blocked.values()):
            shared.rejected.pop(exposed, None)
        for raw, exposed in blocked.items():
            shared.rejected[exposed] = (
                f"changed since pinned; run: mcp-hub pins accept {shared.name}/{raw}")
        if shared.pin_blocked != set(blocked.values()):
            shared.pin_blocked = set(blocked.values())
            shared.hooks.pulse()

    def _register(self, rec: ToolRecord) -> bool:
        shared = self.shared
        holder = shared.registry.get_entry(rec.exposed)
        if (holder is not None and holder.toolset != shared.toolset
                and shared.hooks.yields_to(shared.name, holder.toolset)):
            shared.rejected[rec.exposed] = (
                f"shadowed by toolset {holder.toolset!r} (later in servers.toml wins)")
            return False
        ok: bool = shared.registry.register(
            rec.exposed, shared.toolset, rec.schema, self._handler(rec.raw, rec.plan),
            description=str(rec.schema.get("description") or ""), origin="upstream",
        )
        if ok:
            shared.rejected.pop(rec.exposed, None)
        else:
            reason = "name held by another tool"
            for rej in shared.registry.rejections:
                if rej.name == rec.exposed and rej.toolset == shared.toolset:
                    reason = rej.reason
            shared.rejected[rec.exposed] = reason
        return ok

    def reassert_tools(self) -> None:
        """Register again any of this server's tools whose name is free now."""
        shared = self.shared
        registry = shared.registry
        if shared.session is None:
            return
        missing = [r for r in shared.tools.values() if registry.get_entry(r.exposed) is None]
        if missing:
            with registry.batch():
                for rec in missing:
                    self._register(rec)

    def _handler(self, raw: str, plan: ArgumentPlan | None = None
                 ) -> Callable[..., Awaitable[types.CallToolResult]]:
        """The registry's handler of upstream tool ``raw``: the call as the upstream names it.

        With a rewrite of its arguments (``plan``), the client's arguments become the
        upstream's (mcp_hub.rewrite) first; a refused call never reaches the upstream.
        """
        call_tool = self.call_tool  # the bound call path itself: no hop on the hot path
        if plan is None:
            async def forward(
                args: dict[str, Any] | None, *, call: CallContext | None = None, **_: Any
            ) -> types.CallToolResult:
                return await call_tool(raw, args, call)
        else:
            async def forward(
                args: dict[str, Any] | None, *, call: CallContext | None = None, **_: Any
            ) -> types.CallToolResult:
                try:
                    claims = call.claims() if plan.templated and call is not None else {}
                    upstream_args = plan.apply(args, claims)
                except Refused as exc:
                    return types.CallToolResult(
                        content=[types.TextContent(text=str(exc))], is_error=True)
                return await call_tool(raw, upstream_args, call)

        forward.__name__ = f"upstream_{self.shared.name}_tool"
        return forward


def _wanted_name(raw: str, rules: Mapping[str, Any]) -> str:
    """The name a tool goes by before the prefix: its rewrite's ``name``, or its own."""
    rule = rules.get(raw)
    return str(rule.name) if rule is not None and rule.name else raw
