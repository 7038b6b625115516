"""Session ids that carry their own session: sealed (AES-GCM) client state.

A 2025-era client keeps one ``Mcp-Session-Id`` for its whole session, while a
load balancer may send each of its requests to another hub replica. So that
any replica can serve it, the id itself holds what ``initialize`` settled —
the protocol version the client asked for, its capabilities and client info —
encrypted and authenticated with a key every replica derives from
``[hub.http] session_secret``. A client can read nothing in it and change
nothing without the id being refused (404, as for any unknown session).

The id also binds the session to the credential that opened it (a digest of
the ``Authorization`` header, or of the signed-in identity): presented with
another token, it is refused. It carries the time it was sealed and its
absolute expiry, which every replica checks
(:class:`~mcp_hub.downstream.replicas.sessions.Lifetimes`).
What changes after ``initialize`` (log level, subscriptions) lives in the
shared state store instead (:mod:`mcp_hub.downstream.replicas.sessions`).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import time
import zlib
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mcp_hub.downstream.identity import IDENTITY_KEY

__all__ = ["PREFIX", "SessionSealer", "credential_tag"]

#: Every sealed id starts with this (and the key version), so they are told from plain ids.
PREFIX = "s1."
_AAD = b"mcp-hub session v1"
_MAX_ID = 4096


def session_credential(scope: Any) -> str:
    """What a session is bound to: the signed-in identity the HTTP guard found, so a
    refreshed access token keeps its session, or else the Authorization header."""
    identity = scope.get(IDENTITY_KEY)
    if identity is not None:
        return f"identity\0{identity.kind}\0{getattr(identity, 'iss', None) or ''}\0{identity.name}"
    return next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"authorization"), "")


@functools.lru_cache(maxsize=256)
def credential_tag(authorization: str) -> str:
    """A short digest of the Authorization header a session was opened with.

    Cached: it is computed for every request of a sealed session, and a deployment
    has few distinct credentials."""
    if not authorization:
        return ""
    return hashlib.sha256(b"mcp-hub session owner\0" + authorization.encode()).hexdigest()[:24]


class SessionSealer:
    """Seals a session's state into an id and opens it again (AES-256-GCM)."""

    def __init__(self, secret: str) -> None:
        if len(secret) < 16:
            from mcp_hub.errors import ConfigError

            raise ConfigError("[hub.http] session_secret: use at least 16 characters "
                              "(32 random bytes, base64, is a good choice)")
        key = hashlib.sha256(b"mcp-hub session key\0" + secret.encode()).digest()
        self._aead = AESGCM(key)

    def seal(self, state: dict[str, Any]) -> str:
        """A fresh session id holding ``state`` (JSON-able); unique even for equal states."""
        body = dict(state, n=os.urandom(8).hex(), ts=int(time.time()))
        plain = zlib.compress(json.dumps(body, separators=(",", ":")).encode())
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, plain, _AAD)
        return PREFIX + base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def open(self, session_id: str) -> dict[str, Any] | None:
        """The state sealed in ``session_id``, or None if it is not one of ours (or altered)."""
        if not session_id.startswith(PREFIX) or len(session_id) > _MAX_ID:
            return None
        text = session_id[len(PREFIX):]
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            plain = self._aead.decrypt(raw[:12], raw[12:], _AAD)
            state = json.loads(zlib.decompress(plain))
        except (ValueError, InvalidTag, zlib.error):
            return None
        return state if isinstance(state, dict) else None
