"""``[[access]]`` rules: the first rule whose ``match`` fits an identity decides.

Pure functions over the config models, so the enforcement point
(:mod:`mcp_hub.hub.access`) and the HTTP guard (an identity no rule admits gets 403)
agree, and a reloaded config applies to the next request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from mcp_hub.auth.settings import AccessRule

__all__ = ["first_match"]


def first_match(rules: Sequence[AccessRule], attributes: Iterable[str]) -> AccessRule | None:
    """The first rule matching an identity's attributes (``*`` matches every identity)."""
    attrs = attributes if isinstance(attributes, frozenset) else frozenset(attributes)
    for rule in rules:
        if rule.match == "*" or rule.match in attrs:
            return rule
    return None
