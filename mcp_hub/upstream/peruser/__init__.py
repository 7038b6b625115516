"""Per-user OAuth to an upstream (``[servers.NAME] oauth_per_user = true``).

Each signed-in identity connects its own account at the hub's ``/connect/NAME``
page and gets its own upstream session with its own tokens; the hub never sends
one user's token for another, and never forwards the client's own token.

Modules: :mod:`.links` (the signed, short-lived, single-use connect links),
:mod:`.session` (opening one upstream session through an OAuth provider),
:mod:`.pool` (the bounded per-(server, identity) sessions with idle eviction),
:mod:`.flows` (the browser flow: authorization code + PKCE through the SDK's
``OAuthClientProvider``), :mod:`.service` (what the Hub owns: the catalog, the
call handler with its URL elicitation, the page and callback handlers),
:mod:`.relay` (progress and log messages of a call, back to its client).
"""

from mcp_hub.upstream.peruser.service import PerUserServers, hub_connected

__all__ = ["PerUserServers", "hub_connected"]
