"""What a caller may reach: the one enforcement point for tools, prompts and resources.

Every path that names a tool, prompt or resource asks here first: ``tools/list``
and ``tools/call`` (the SDK server and the stdio fast path), the bridge tools
(``tool_search``, ``tool_describe``, ``tool_call``, whose catalog is built per
caller), ``prompts/list|get``, ``resources/list|read|templates/list``,
``resources/subscribe``, ``subscriptions/listen``, ``completion/complete`` and
the resource-update notifications.

A :class:`Caller` describes who asks: the profile of the endpoint
(``/p/NAME/mcp``, ``--profile``) and, over HTTP with sign-in, the identity behind
the bearer token with its attributes. ``[[access]]`` rules
(:mod:`mcp_hub.auth.rules`) map the identity to a profile; the caller reaches
what both the endpoint's profile and the identity's profile allow.
:meth:`AccessControl.profiles` names those profiles: the one notion of "the
caller's profile" that access and the profiles' tool rewrites
(:mod:`mcp_hub.rewrite.profiles`) both follow, so a tool rewritten for a profile
looks and calls the same whether the caller came in by the profile's endpoint or
by an identity the rules map to it.
An :class:`AccessPolicy` is computed once per (caller, registry generation,
config) and is cheap to consult.

A hidden name is indistinguishable from one that does not exist: the same
error text, and "did you mean" suggestions drawn only from what the caller sees.

The operations views (``/status.json``, the status page, ``/metrics``, ``hub_status``)
ask here too: :meth:`AccessControl.ops_view` says which servers, tools and
identities' counters one caller sees. Only a caller without an identity (no
sign-in) or one whose ``[[access]]`` rule says ``admin = true`` sees everything.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_hub.auth.rules import first_match
from mcp_hub.auth.settings import AccessRule
from mcp_hub.config.model import HubConfig
from mcp_hub.errors import resource_not_found
from mcp_hub.pipeline.calls import unknown_tool
from mcp_hub.registry.naming import server_of_toolset
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.registry.toolsets import ALL_ALIASES, DEFAULT_TOOLSETS, Toolsets

__all__ = [
    "EVERYONE",
    "AccessControl",
    "AccessPolicy",
    "Caller",
    "OpsView",
    "Owners",
    "as_caller",
    "unknown_prompt",
    "unknown_resource",
]

_POLICY_CACHE = 64


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the endpoint's profile, and the signed-in identity if any.

    ``profile`` None means the unrestricted endpoint. ``identity`` is the identity's
    name (``alice``, ``token:ci``) and ``attributes`` what ``[[access]]`` rules match
    (``sub:alice``, ``scope:x``, ``group:ops``, ``client:id``, ``token:ci``). Frozen
    and hashable: it keys the policy and bridge caches.
    """

    profile: str | None = None
    identity: str | None = None
    attributes: frozenset[str] = frozenset()

    @property
    def client_id(self) -> str | None:
        """The OAuth client the identity signed in with, if known."""
        for attr in self.attributes:
            if attr.startswith("client:"):
                return attr[len("client:"):]
        return None

    @property
    def label(self) -> str:
        """A short name for logs and status (never a credential)."""
        parts = [f"profile={self.profile}" if self.profile else "default"]
        if self.identity:
            parts.append(f"identity={self.identity}")
        return " ".join(parts)


EVERYONE = Caller()


def as_caller(who: Caller | str | None) -> Caller:
    """A :class:`Caller` from a caller, a profile name, or None (everyone)."""
    if isinstance(who, Caller):
        return who
    return Caller(profile=who)


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """The names one caller may reach.

    ``tools`` None: every tool. ``servers`` None: every upstream server's prompts
    and resources, minus ``denied_servers``.
    """

    tools: frozenset[str] | None = None
    servers: frozenset[str] | None = None
    denied_servers: frozenset[str] = frozenset()

    @property
    def unrestricted(self) -> bool:
        return self.tools is None and self.servers is None and not self.denied_servers

    def tool(self, name: str) -> bool:
        return self.tools is None or name in self.tools

    def server(self, server: str | None) -> bool:
        if server is None:
            return self.unrestricted
        if server in self.denied_servers:
            return False
        return self.servers is None or server in self.servers


UNRESTRICTED = AccessPolicy()
NOTHING = AccessPolicy(tools=frozenset(), servers=frozenset())


def _narrower(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    return a if b is None else a & b


def _both(a: AccessPolicy, b: AccessPolicy) -> AccessPolicy:
    """What both policies allow (an endpoint's profile and an identity's rule)."""
    return AccessPolicy(tools=_narrower(a.tools, b.tools), servers=_narrower(a.servers, b.servers),
                        denied_servers=a.denied_servers | b.denied_servers)


@dataclass(frozen=True, slots=True)
class OpsView:
    """What the operations views show one caller.

    ``full``: everything, every identity's counters included (no sign-in, or an
    ``admin = true`` rule). Otherwise the tools of ``policy``, the servers in
    ``servers`` (None: every server) and the counters of ``identity`` alone;
    the hub-wide sections (sessions, replicas, state, pins) only when the policy
    reaches everything.
    """

    full: bool
    policy: AccessPolicy = UNRESTRICTED
    servers: frozenset[str] | None = None
    identity: str | None = None

    @property
    def hub_wide(self) -> bool:
        """Whether sections about the whole hub (sessions, replicas, pins, state) show."""
        return self.full or self.policy.unrestricted

    def shows_tool(self, name: str) -> bool:
        return self.full or self.policy.tool(name)

    def shows_server(self, name: str) -> bool:
        return self.full or self.servers is None or name in self.servers

    def shows_identity(self, name: str) -> bool:
        return self.full or (self.identity is not None and name == self.identity)


FULL_VIEW = OpsView(full=True)


class Owners(Protocol):
    """Which upstream server owns a prompt, resource or template (the upstream manager)."""

    def prompt_server(self, name: str) -> str | None: ...
    def resource_server(self, uri: str) -> str | None: ...
    def template_server(self, uri_template: str) -> str | None: ...


def unknown_prompt(name: str) -> MCPError:
    """The error for a prompt the caller cannot see (the same as for no such prompt)."""
    return MCPError(types.INVALID_PARAMS, f"Unknown prompt: {name}")


def unknown_resource(uri: str) -> MCPError:
    """The error for a resource the caller cannot see (the same as for no such resource)."""
    return resource_not_found(uri)


def _servers_of(names: Iterable[str]) -> frozenset[str]:
    return frozenset(s for s in map(server_of_toolset, names) if s is not None)


class AccessControl:
    """Computes and applies :class:`AccessPolicy` for callers of one hub."""

    def __init__(self, config: Callable[[], HubConfig], registry: ToolRegistry, owners: Owners,
                 toolsets: Toolsets | None = None) -> None:
        self._config = config
        self._registry = registry
        #: The Hub's own toolsets (composites from its config); the process-wide table if none.
        self._toolsets = toolsets if toolsets is not None else DEFAULT_TOOLSETS
        self._owners = owners
        self._cache: OrderedDict[Caller, tuple[int, HubConfig, AccessPolicy]] = OrderedDict()

    # ------------------------------------------------------------------ policy
    def policy(self, who: Caller | str | None) -> AccessPolicy:
        """The policy of ``who``, cached per registry generation and config."""
        caller = as_caller(who)
        if caller.profile is None and caller.identity is None:
            return UNRESTRICTED
        config = self._config()
        generation = self._registry.generation
        hit = self._cache.get(caller)
        if hit is not None and hit[0] == generation and hit[1] is config:
            self._cache.move_to_end(caller)
            return hit[2]
        policy = self._compute(caller, config)
        self._cache[caller] = (generation, config, policy)
        while len(self._cache) > _POLICY_CACHE:
            self._cache.popitem(last=False)
        return policy

    @staticmethod
    def rule_of(caller: Caller, config: HubConfig) -> AccessRule | None:
        """The ``[[access]]`` rule that decides for the caller's identity (None: no
        identity, no rules, or no rule matches)."""
        if caller.identity is None or not config.access:
            return None
        return first_match(config.access, caller.attributes)

    def profiles(self, who: Caller | str | None) -> tuple[str, ...]:
        """The profiles whose view of the tools ``who`` gets, each once: the endpoint's,
        then its identity's ``[[access]]`` rule's. Empty: the hub's own view.

        Access reaches what all of them allow; their tool rewrites apply in this
        order, the rule's on top (:func:`mcp_hub.rewrite.profiles.stacked`).
        """
        caller = as_caller(who)
        rule = self.rule_of(caller, self._config())
        found = [p for p in (caller.profile, rule.profile if rule is not None else None)
                 if p is not None]
        return tuple(dict.fromkeys(found))

    def _compute(self, caller: Caller, config: HubConfig) -> AccessPolicy:
        # The endpoint's profile, narrowed by the identity's [[access]] rule. Without
        # rules every identity reaches what its endpoint reaches; with rules, an
        # identity no rule matches reaches nothing.
        endpoint = self._profile_policy(caller.profile, config)
        if caller.identity is None or not config.access:
            return endpoint
        rule = self.rule_of(caller, config)
        if rule is None:
            return NOTHING
        return _both(endpoint, self._profile_policy(rule.profile, config))

    def _profile_policy(self, profile: str | None, config: HubConfig) -> AccessPolicy:
        if profile is None:
            return UNRESTRICTED
        prof = config.profiles.get(profile)
        if prof is None:
            # An unknown profile (removed by a reload) reaches nothing.
            return AccessPolicy(tools=frozenset(), servers=frozenset())
        # A toolset may name a tool as this profile shows it (its rewrite's ``name``):
        # the policy holds the server-level exposed names the registry knows.
        renamed = {r.name: name for name, r in prof.tools.items() if r.name and r.name != name}
        names = self._toolsets.resolve_profile(prof.toolsets, prof.disabled_toolsets,
                                               self._registry, renamed)
        tools = None if names is None else frozenset(names)
        denied = _servers_of(self._toolsets.reached_toolsets(prof.disabled_toolsets))
        reached = self._toolsets.reached_toolsets(prof.toolsets)
        everything = not prof.toolsets or bool(reached & ALL_ALIASES)
        servers = None if everything else _servers_of(reached)
        return AccessPolicy(tools=tools, servers=servers, denied_servers=denied)

    # ------------------------------------------------------------------ operations views
    def ops_view(self, who: Caller | str | None) -> OpsView:
        """What ``/status.json``, the status page, ``/metrics`` and ``hub_status`` show ``who``."""
        caller = as_caller(who)
        config = self._config()
        if caller.identity is not None and config.access:
            rule = first_match(config.access, caller.attributes)
            if rule is not None and rule.admin:
                return FULL_VIEW
        policy = self.policy(caller)
        if caller.identity is None and policy.unrestricted:
            return FULL_VIEW  # no sign-in: the operator's own hub
        servers = None if policy.unrestricted else self._servers_shown(policy, config)
        return OpsView(full=False, policy=policy, servers=servers, identity=caller.identity)

    def _servers_shown(self, policy: AccessPolicy, config: HubConfig) -> frozenset[str]:
        """The upstream servers the policy reaches, and the toolsets of the tools it reaches."""
        shown = {name for name in config.servers if policy.server(name)}
        for entry in self._registry.snapshot().values():
            if policy.tool(entry.name):
                shown.add(server_of_toolset(entry.toolset) or entry.toolset)
        return frozenset(shown)

    # ------------------------------------------------------------------ tools
    def tool_filter(self, who: Caller | str | None) -> Callable[[str], bool] | None:
        """A predicate for tool names the caller may call (None: every name)."""
        policy = self.policy(who)
        return None if policy.tools is None else policy.tool

    def check_tool(self, who: Caller | str | None, name: str) -> None:
        """Raise the "Unknown tool" error for a tool the caller cannot reach."""
        policy = self.policy(who)
        if not policy.tool(name):
            raise unknown_tool(name, self._registry, policy.tool)

    # ------------------------------------------------------------------ prompts
    def prompts(self, who: Caller | str | None, prompts: list[types.Prompt]) -> list[types.Prompt]:
        policy = self.policy(who)
        if policy.unrestricted:
            return prompts
        return [p for p in prompts if policy.server(self._owners.prompt_server(p.name))]

    def check_prompt(self, who: Caller | str | None, name: str) -> None:
        policy = self.policy(who)
        if not policy.unrestricted and not policy.server(self._owners.prompt_server(name)):
            raise unknown_prompt(name)

    # ------------------------------------------------------------------ resources
    def resources(self, who: Caller | str | None, resources: list[types.Resource]) -> list[types.Resource]:
        policy = self.policy(who)
        if policy.unrestricted:
            return resources
        return [r for r in resources if policy.server(self._owners.resource_server(str(r.uri)))]

    def templates(
        self, who: Caller | str | None, templates: list[types.ResourceTemplate]
    ) -> list[types.ResourceTemplate]:
        policy = self.policy(who)
        if policy.unrestricted:
            return templates
        return [t for t in templates if policy.server(self._owners.template_server(t.uri_template))]

    def may_read(self, who: Caller | str | None, uri: str) -> bool:
        policy = self.policy(who)
        return policy.unrestricted or policy.server(self._owners.resource_server(uri))

    def check_resource(self, who: Caller | str | None, uri: str) -> None:
        if not self.may_read(who, uri):
            raise unknown_resource(uri)

    def check_completion(
        self, who: Caller | str | None, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> None:
        """A completion names a prompt or a resource template: the same rules apply."""
        policy = self.policy(who)
        if policy.unrestricted:
            return
        if isinstance(ref, types.PromptReference):
            self.check_prompt(who, ref.name)
            return
        server = self._owners.template_server(ref.uri)
        if server is None:
            server = self._owners.resource_server(ref.uri)
        if not policy.server(server):
            raise unknown_resource(ref.uri)


#: The key of a connection's caller on its state (a dict), for notifications sent later.
CALLER_KEY = "mcp_hub.caller"


def remember_caller(connection: Any, caller: Caller) -> None:
    """Store the caller on a connection, for notifications sent to it later."""
    state = getattr(connection, "state", None)
    if isinstance(state, dict):
        state[CALLER_KEY] = caller


def caller_of_state(state: Any) -> Caller:
    """The caller stored on a connection's state (the unrestricted caller if none)."""
    if isinstance(state, dict):
        found = state.get(CALLER_KEY)
        if isinstance(found, Caller):
            return found
    return EVERYONE
