"""The access policy itself, and the pushes that no request names: resource updates.

Handshake sessions get ``notifications/resources/updated`` for what they
subscribed; ``subscriptions/listen`` streams get bus events. Both are filtered
per caller at delivery time, so a reload that narrows a profile also narrows
what its open sessions hear.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.subscriptions import ResourceUpdated, ServerEvent, ToolsListChanged

from mcp_hub.config.model import parse_config
from mcp_hub.downstream.visibility import CallerBus, remember_caller
from mcp_hub.hub.access import EVERYONE, AccessControl, Caller
from mcp_hub.hub.core import Hub
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.registry.toolsets import register_composite, unregister_composite

pytestmark = pytest.mark.anyio

CONFIG = """
[profiles.narrow]
toolsets = ["mcp-a"]
[profiles.wide]
toolsets = ["all"]
disabled_toolsets = ["mcp-b"]
[profiles.composite]
toolsets = ["team"]
[toolsets.team]
includes = ["mcp-a"]
"""


class Owners:
    """Server a owns a:// URIs and a_ prompts; server b the b ones."""

    def prompt_server(self, name: str) -> str | None:
        return name[0] if name[:2] in ("a_", "b_") else None

    def resource_server(self, uri: str) -> str | None:
        return uri[0] if uri[:4] in ("a://", "b://") else None

    def template_server(self, uri_template: str) -> str | None:
        return self.resource_server(uri_template)


def test_policy_per_profile() -> None:
    config = parse_config(CONFIG)
    access = AccessControl(lambda: config, ToolRegistry(), Owners())
    assert access.policy(EVERYONE).unrestricted
    register_composite("team", [], ["mcp-a"], "")
    try:
        narrow, wide, comp = (access.policy(p) for p in ("narrow", "wide", "composite"))
    finally:
        unregister_composite("team")
    for policy in (narrow, comp):
        assert policy.server("a") and not policy.server("b") and not policy.server(None)
    assert wide.server("a") and not wide.server("b")
    assert not access.may_read("narrow", "b://x") and access.may_read("narrow", "a://x")
    # A profile that a reload removed reaches nothing.
    gone = access.policy(Caller(profile="removed"))
    assert not gone.server("a") and not gone.tool("a_echo")


async def test_listen_streams_only_hear_what_the_caller_may_read() -> None:
    config = parse_config(CONFIG)
    access = AccessControl(lambda: config, ToolRegistry(), Owners())
    from mcp.server.subscriptions import InMemorySubscriptionBus

    bus = InMemorySubscriptionBus()
    heard: dict[str, list[ServerEvent]] = {"narrow": [], "all": []}
    CallerBus(bus, access, Caller(profile="narrow")).subscribe(heard["narrow"].append)
    CallerBus(bus, access, EVERYONE).subscribe(heard["all"].append)
    for event in (ResourceUpdated(uri="a://1"), ResourceUpdated(uri="b://1"), ToolsListChanged()):
        await bus.publish(event)
    assert heard["narrow"] == [ResourceUpdated(uri="a://1"), ToolsListChanged()]
    assert len(heard["all"]) == 3


class FakeConnection:
    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.updated: list[str] = []

    async def send_resource_updated(self, uri: str) -> None:
        self.updated.append(uri)


async def test_resource_updates_reach_only_allowed_subscribers() -> None:
    config = parse_config(CONFIG)
    async with Hub(config, load_builtins=False, load_plugin_modules=False) as hub:
        owners = Owners()
        hub.upstreams.resource_server = owners.resource_server  # type: ignore[method-assign]
        narrow, full = FakeConnection(), FakeConnection()
        remember_caller(narrow, Caller(profile="narrow"))
        remember_caller(full, EVERYONE)
        for uri in ("a://1", "b://1"):
            hub.upstream_serving.subscribers[uri] = [narrow, full]
            await hub._on_resource_updated(uri)
        assert narrow.updated == ["a://1"]
        assert full.updated == ["a://1", "b://1"]
