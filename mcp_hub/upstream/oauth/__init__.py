"""The hub as an OAuth client of its upstream servers (``auth = "oauth"``).

Modules: :mod:`.provider` (the SDK's ``OAuthClientProvider`` adapted to a
long-running hub), :mod:`.tokens` (the SDK's ``TokenStorage``, encrypted),
:mod:`.kvstore` (the state-store interface and its file backend),
:mod:`.secretbox` (the key and encryption), :mod:`.attach` (hooks for the
transports and the supervisor), :mod:`.login` (``mcp-hub login`` / ``logout``).
"""
