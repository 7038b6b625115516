"""Signing in to the hub: the HTTP hub as an OAuth 2.1 protected resource.

Small modules, each for one job: :mod:`.settings` (the ``[auth]``, ``[[access]]``
and ``[audit]`` config models), :mod:`.identity` (who a request is),
:mod:`.rules` (which profile an identity reaches), :mod:`.discovery` (the
authorization server's metadata and its keys), :mod:`.jwt_verify` (access
tokens as JWTs), :mod:`.introspection` (opaque tokens, RFC 7662),
:mod:`.metadata` (RFC 9728 documents and ``WWW-Authenticate`` challenges),
:mod:`.authenticator` (all of it behind one call) and :mod:`.audit` (one JSON
line per call). Nothing here imports the hub: the hub and the HTTP guard import
these modules.
"""
