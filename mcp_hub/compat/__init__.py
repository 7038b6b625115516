"""The one door to other libraries' private insides.

The hub reaches a few names the MCP SDK, PyJWT, OpenTelemetry and asyncio do not
publish: hooks of the SDK's session manager (the session cap, eviction, resume,
replicas), counters and streams of its HTTP transport (the HTTP fast path, the
replica bus), its client dispatcher (the lean ``tools/call``), its private
stream and input-round modules, a JWK's fields, an OTLP exporter's preferences.
Every such touch lives in this package and nowhere else
(``tests/test_compat.py`` scans the source for strays), so a release that
renames one breaks here, in one place, with a name.

:func:`~mcp_hub.compat.hooks.check_hooks` inspects each hook the hub relies on
at start-up: it exists and has the expected shape. A missing hook turns its
feature off with one clear warning, or stops the hub where there is no safe
fallback (:func:`~mcp_hub.compat.hooks.enforce`). The package imports no other
module of the hub: every layer may use it.
"""

from mcp_hub.compat.hooks import HOOKS, ON_DEMAND, Hook, HookProblem, check_hooks, enforce, feature_ok

__all__ = ["HOOKS", "ON_DEMAND", "Hook", "HookProblem", "check_hooks", "enforce", "feature_ok"]
