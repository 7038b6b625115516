"""The rewrite of one definition and of one call's arguments (mcp_hub/rewrite), in-process."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.types import CallToolResult

from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError, UnknownToolError
from mcp_hub.hub.access import AccessControl, Caller
from mcp_hub.registry.frozen import FrozenDict
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.rewrite.profiles import ProfileRewrites, stacked
from mcp_hub.rewrite.settings import ToolRewrite
from mcp_hub.rewrite.tool import ArgumentPlan, Refused, rewrite_definition

DEFINITION: dict[str, Any] = {
    "name": "gh_create_issue", "description": "Create an issue.",
    "annotations": {"readOnlyHint": True, "openWorldHint": True},
    "inputSchema": {"type": "object", "required": ["owner", "title"], "properties": {
        "owner": {"type": "string"}, "title": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}}, "token": {"type": "string"}}},
    "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
}

RULE = ToolRewrite.model_validate({
    "title": "New issue", "description": "Open an acme issue.",
    "annotations": {"readOnlyHint": False},
    "arguments": {"owner": {"fixed": "{identity.sub}"},
                  "title": {"rename": "summary", "description": "One line."},
                  "labels": {"default": ["triage"]},
                  "token": {"default": "s3cret-value", "description": "Set by the hub."}}})


def test_a_definition_is_rewritten_and_the_original_left_untouched() -> None:
    frozen = FrozenDict(DEFINITION)
    out = rewrite_definition(frozen, RULE, secrets=["s3cret-value"])
    assert out["title"] == "New issue" and out["description"] == "Open an acme issue."
    assert out["annotations"] == {"readOnlyHint": False, "openWorldHint": True}
    schema = out["inputSchema"]
    assert list(schema["properties"]) == ["summary", "labels", "token"]
    assert schema["required"] == ["summary"]
    assert schema["properties"]["summary"] == {"type": "string", "description": "One line."}
    assert schema["properties"]["labels"]["default"] == ["triage"]
    assert "default" not in schema["properties"]["token"]  # a secret is filled, not shown
    assert out["outputSchema"] is DEFINITION["outputSchema"]
    assert DEFINITION["inputSchema"]["required"] == ["owner", "title"]


def test_arguments_are_renamed_defaulted_fixed_and_refused() -> None:
    plan = ArgumentPlan.of("gh_new_issue", RULE)
    assert plan is not None and plan.templated
    out = plan.apply({"summary": "Fix", "labels": ["bug"]}, {"sub": "alice"})
    assert out == {"title": "Fix", "labels": ["bug"], "token": "s3cret-value", "owner": "alice"}
    assert plan.apply({"summary": "Fix"}, {"sub": "bob"})["labels"] == ["triage"]
    with pytest.raises(Refused, match="'owner' is set by the hub"):
        plan.apply({"summary": "x", "owner": "evil"}, {"sub": "alice"})
    with pytest.raises(Refused, match="it is called 'summary'"):
        plan.apply({"title": "x"}, {"sub": "alice"})
    with pytest.raises(Refused, match="claim 'sub'"):
        plan.apply({"summary": "x"}, {})


def test_a_rule_that_changes_no_argument_adds_no_step() -> None:
    assert ArgumentPlan.of("t", ToolRewrite(description="d")) is None
    assert ArgumentPlan.of("t", None) is None


def test_a_profile_renames_hides_and_translates() -> None:
    rules = {"gh_new_issue": ToolRewrite.model_validate(
                 {"name": "report", "arguments": {"labels": {"fixed": ["customer"]}}}),
             "gh_delete": ToolRewrite(hide=True)}
    profile = ProfileRewrites(rules)
    defs = [{"name": "gh_new_issue", "inputSchema": {"type": "object", "properties": {
        "summary": {}, "labels": {}}}}, {"name": "gh_delete"}, {"name": "gh_other"}]
    shown = profile.definitions(defs)
    assert [d["name"] for d in shown] == ["report", "gh_other"]
    assert list(shown[0]["inputSchema"]["properties"]) == ["summary"]
    assert profile.names({"gh_new_issue": "gh"}) == {"gh_new_issue": "gh", "report": "gh"}
    translate = profile.translator(dict)
    assert translate("report", {"summary": "s"}) == (
        "gh_new_issue", {"summary": "s", "labels": ["customer"]})
    assert translate("gh_other", {"a": 1}) == ("gh_other", {"a": 1})
    refused = translate("report", {"labels": ["x"]})
    assert isinstance(refused, CallToolResult) and refused.is_error
    for gone in ("gh_delete", "gh_new_issue"):
        with pytest.raises(UnknownToolError):
            translate(gone, {})


def test_config_refuses_a_fixed_argument_that_is_also_renamed() -> None:
    text = ('[servers.gh]\ncommand = "x"\n[servers.gh.tools.t.arguments.a]\n'
            'fixed = 1\nrename = "b"\n')
    with pytest.raises(ConfigError, match=r"servers\.gh\.tools\.t\.arguments\.a.*'fixed'"):
        parse_config(text)
    with pytest.raises(ConfigError, match="did you mean 'fixed'"):
        parse_config('[servers.gh]\ncommand = "x"\n[servers.gh.tools.t.arguments.a]\nfixd = 1\n')


@pytest.mark.anyio
async def test_a_per_user_servers_catalog_is_rewritten_and_its_calls_too() -> None:
    """A per-user server (each identity's own session) gets the same server-level rewrites."""
    from mcp.types import Tool

    from mcp_hub.config.model import HubSettings, ServerConfig
    from mcp_hub.pipeline.context import CallContext
    from mcp_hub.registry.tool_registry import ToolRegistry
    from mcp_hub.upstream.peruser.catalog import PerUserCatalog

    server = ServerConfig.model_validate({
        "url": "http://127.0.0.1:9/mcp", "auth": "oauth", "oauth_per_user": True,
        "tools": {"create_issue": {"name": "new_issue", "description": "Open an issue.",
                                   "arguments": {"owner": {"fixed": "{identity.sub}"}}},
                  "delete_repo": {"hide": True}}})
    received: list[tuple[str, dict[str, Any]]] = []

    def handler(raw: str) -> Any:
        async def call(args: dict[str, Any] | None, **_: Any) -> CallToolResult:
            received.append((raw, dict(args or {})))
            return CallToolResult(content=[])
        return call

    registry = ToolRegistry()
    catalog = PerUserCatalog("gh", server, HubSettings(), registry, handler)
    schema = {"type": "object", "properties": {"owner": {"type": "string"},
                                               "title": {"type": "string"}}}
    catalog.update([Tool(name="create_issue", description="x", input_schema=schema),
                    Tool(name="delete_repo", description="y", input_schema=schema)])
    assert sorted(registry.names()) == ["gh_new_issue"]
    entry = registry.get_entry("gh_new_issue")
    assert entry is not None and entry.schema["description"] == "Open an issue."
    assert list(entry.schema["inputSchema"]["properties"]) == ["title"]

    class Caller:
        attributes = frozenset({"sub:alice"})

    call = CallContext(tool_name="gh_new_issue", caller=Caller())
    await registry.dispatch("gh_new_issue", {"title": "t"}, call=call)
    assert received == [("create_issue", {"title": "t", "owner": "alice"})]
    refused = await registry.dispatch("gh_new_issue", {"title": "t", "owner": "x"}, call=call)
    assert refused.is_error and len(received) == 1


def test_two_profiles_stack_the_rules_profile_on_top() -> None:
    endpoint = {"gh_a": ToolRewrite.model_validate({
        "name": "ep_a", "description": "endpoint", "title": "A",
        "arguments": {"owner": {"rename": "org"}, "labels": {"default": ["x"]}}}),
        "gh_b": ToolRewrite.model_validate({"description": "only the endpoint's"})}
    rule = {"gh_a": ToolRewrite.model_validate({
        "description": "rule", "arguments": {"owner": {"fixed": "acme"}}}),
        "gh_c": ToolRewrite.model_validate({"hide": True})}
    merged = stacked([endpoint, rule])
    a = merged["gh_a"]
    assert (a.name, a.title, a.description) == ("ep_a", "A", "rule")
    assert a.arguments["owner"].fixed == "acme" and a.arguments["owner"].rename is None
    assert a.arguments["labels"].default == ["x"]
    assert merged["gh_b"].description == "only the endpoint's" and merged["gh_c"].hide
    hidden = stacked([rule, {"gh_c": ToolRewrite.model_validate({"description": "shown?"})}])
    assert hidden["gh_c"].hide


def test_a_callers_profiles_are_its_endpoints_then_its_rules() -> None:
    config = parse_config('[profiles.support]\n[profiles.ops]\n'
                          '[[access]]\nmatch = "token:agent"\nprofile = "support"\n'
                          '[[access]]\nmatch = "token:dev"\n')
    control = AccessControl(lambda: config, ToolRegistry(), _NoOwners())
    agent = frozenset({"token:agent"})
    assert control.profiles(Caller(identity="token:agent", attributes=agent)) == ("support",)
    assert control.profiles(Caller(profile="ops", identity="token:agent",
                                   attributes=agent)) == ("ops", "support")
    assert control.profiles(Caller(profile="support", identity="token:agent",
                                   attributes=agent)) == ("support",)
    dev = Caller(identity="token:dev", attributes=frozenset({"token:dev"}))
    assert control.profiles(dev) == ()
    assert control.profiles(Caller(profile="ops")) == ("ops",)
    assert control.profiles(None) == ()


class _NoOwners:
    def prompt_server(self, name: str) -> str | None:
        return None

    def resource_server(self, uri: str) -> str | None:
        return None

    def template_server(self, uri_template: str) -> str | None:
        return None
