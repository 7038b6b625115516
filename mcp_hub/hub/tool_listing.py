"""What ``tools/list`` shows a caller, computed in steps (:mod:`mcp_hub.registry.steps`).

After a registry change, the caller's definitions walk the whole catalog: the
registry's definition list (sorted, filtered by availability and the caller's
access), the name → origin and name → server maps, and the ``tool_search``
plan. For a thousand tools that is milliseconds of CPU in one piece. Written in
steps of a few dozen tools, the same code serves :meth:`Hub.tool_definitions`
(run at once) and :meth:`Hub.tool_definitions_sliced` (a checkpoint between two
steps, for the prepared lists of :mod:`mcp_hub.downstream.lists.prepared`).

:class:`ToolListing` is one Hub's walk (the Hub holds it as ``Hub.listing``):
it reads the registry, the access control, the config and the profile's
rewrites it is given, and owns its two small caches (the origin maps per
registry generation, and whether the bridge was active per caller, to log when
that flips).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp_hub.config.model import HubConfig
from mcp_hub.hub.access import AccessControl, Caller
from mcp_hub.registry.naming import server_of_toolset
from mcp_hub.registry.steps import STEP_ITEMS, Steps, run_steps
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.rewrite.profiles import ProfileRewrites
from mcp_hub.search.exposure import plan_exposure_steps

__all__ = ["Origins", "ToolListing"]

logger = logging.getLogger("mcp_hub.hub.core")

Origins = tuple[dict[str, str], dict[str, str]]


class ToolListing:
    """The ``tools/list`` walk of one Hub, with the caches it keeps between walks."""

    def __init__(self, registry: ToolRegistry, access: AccessControl,
                 config: Callable[[], HubConfig],
                 rewrites: Callable[[Caller], ProfileRewrites | None]) -> None:
        self._registry = registry
        self._access = access
        self._config = config
        self._rewrites = rewrites
        #: (registry generation, name → origin, name → server label) of the last walk.
        self._origins: tuple[int, dict[str, str], dict[str, str]] | None = None
        #: Whether the ``tool_search`` bridge was active for a caller at its last listing.
        self._bridge_active: dict[Caller, bool] = {}

    def origins(self) -> Origins:
        """(name → origin, name → server label) of the registry now, in one piece."""
        return run_steps(self.origins_steps())

    def origins_steps(self) -> Steps[Origins]:
        """(name → origin, name → server label) of the registry now, cached per generation."""
        generation = self._registry.generation  # read before the snapshot: never newer than it
        cached = self._origins
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2]
        snap = list(self._registry.snapshot().items())
        origins: dict[str, str] = {}
        servers: dict[str, str] = {}
        labels: dict[str, str] = {}  # toolset -> server label (a few toolsets, many tools)
        for i, (name, e) in enumerate(snap):
            if i % STEP_ITEMS == STEP_ITEMS - 1:
                yield
            origins[name] = e.origin
            label = labels.get(e.toolset)
            if label is None:
                label = labels[e.toolset] = server_of_toolset(e.toolset) or e.toolset
            servers[name] = label
        self._origins = (generation, origins, servers)
        return origins, servers

    def definition_steps(self, caller: Caller) -> Steps[list[dict[str, Any]]]:
        """The definitions ``tools/list`` shows ``caller`` (access filter and ``tool_search`` plan)."""
        config = self._config()
        tools = self._access.policy(caller).tools
        defs = yield from self._registry.definitions.get_steps(
            None if tools is None else set(tools), cache_key=(caller, config.fingerprint()))
        origins, servers = yield from self.origins_steps()
        rewrites = self._rewrites(caller)
        if rewrites is not None:  # the profile's tool rewrites (mcp_hub/rewrite/profiles.py)
            defs = rewrites.definitions(defs)
            origins, servers = rewrites.names(origins), rewrites.names(servers)
        plan = yield from plan_exposure_steps(defs, origins, servers, config.tool_search)
        previous = self._bridge_active.get(caller)
        self._bridge_active[caller] = plan.active
        if previous is not None and previous != plan.active:
            logger.info("tool_search %s for %s (%d deferrable tokens, threshold %d)",
                        "activated" if plan.active else "deactivated", caller.label,
                        plan.deferrable_tokens, plan.threshold_tokens)
        return plan.visible
