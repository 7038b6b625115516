"""Tool rewriting: rename, re-describe, fix and hide a tool's arguments, per server and per profile.

:mod:`~mcp_hub.rewrite.settings` holds the config models, :mod:`~mcp_hub.rewrite.tool`
applies one rule to a definition and to a call's arguments,
:mod:`~mcp_hub.rewrite.profiles` a profile's rules for its callers, and
:mod:`~mcp_hub.rewrite.check` finds mistakes for ``mcp-hub check``. docs/rewriting.md
describes every key.
"""
