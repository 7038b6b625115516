"""Progressive disclosure of upstream tools: the public API.

* :func:`plan_exposure` decides what ``tools/list`` shows and builds the bridge
  tools' definitions (``tool_search`` carries a stable catalog);
* :class:`ToolSearchBridge` runs ``tool_search``, ``tool_describe`` and
  ``tool_call`` for the call pipeline;
* :class:`SearchIndex` is the ranking (BM25F, stemming, synonyms, exact names).

The implementation lives in :mod:`mcp_hub.search`; import from here.
"""

from __future__ import annotations

from mcp_hub.search.bridge import CatalogProvider, Reenter, ToolSearchBridge
from mcp_hub.search.exposure import (
    BRIDGE_NAMES,
    ExposurePlan,
    Mode,
    SettingsLike,
    ToolSearchSettings,
    bridge_definitions,
    catalog_description,
    estimate_tokens,
    is_deferrable,
    plan_exposure,
    threshold_tokens,
)
from mcp_hub.search.ranking import (
    DEFAULT_WEIGHTS,
    IndexCache,
    Match,
    RankingWeights,
    SearchIndex,
    ToolDoc,
)
from mcp_hub.search.semantic import HybridIndex, SemanticEngine, engine_for, ranking_status

__all__ = [
    "BRIDGE_NAMES",
    "DEFAULT_WEIGHTS",
    "CatalogProvider",
    "ExposurePlan",
    "HybridIndex",
    "IndexCache",
    "Match",
    "Mode",
    "RankingWeights",
    "Reenter",
    "SearchIndex",
    "SemanticEngine",
    "SettingsLike",
    "ToolDoc",
    "ToolSearchBridge",
    "ToolSearchSettings",
    "bridge_definitions",
    "catalog_description",
    "engine_for",
    "estimate_tokens",
    "is_deferrable",
    "plan_exposure",
    "ranking_status",
    "threshold_tokens",
]
