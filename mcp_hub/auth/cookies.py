"""The hub's browser cookies: small sealed (AES-256-GCM) records with an expiry.

Two cookies are made here. The **identity cookie** carries who a browser signed
in as — by OpenID Connect (:mod:`mcp_hub.auth.browser`) or by trading a static
token at ``/?token=T`` — so the status page and the connect links know the
person without a bearer header, and ``[[access]]`` rules decide on it exactly as
on a header. The **sign-in cookie** carries one sign-in in progress (``state``,
the PKCE verifier, the ``nonce``, where to go back to), so the callback can be
answered by any replica and only in the browser that began it.

The key is derived from the hub's token key (``MCP_HUB_SECRET_KEY``, or the key
file in the state dir), the one that signs connect links: replicas that share it
accept each other's cookies. Each kind of record is sealed with its own
associated data, so one kind can never be presented as another. A cookie says
nothing readable and cannot be altered or extended; its value is never logged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
from typing import Any, cast

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mcp_hub.auth.identity import Identity, Kind

__all__ = ["FLOW", "IDENTITY", "SealedCookies", "identity_of", "identity_record"]

#: Associated data of the two kinds of record.
IDENTITY = b"mcp-hub identity cookie v1"
FLOW = b"mcp-hub sign-in flow v1"
_MAX = 4096
_KINDS: tuple[Kind, ...] = ("token", "jwt", "introspection")


class SealedCookies:
    """Seals JSON records with an expiry and opens them again (None when altered or expired)."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(hashlib.sha256(b"mcp-hub browser cookies\0" + key).digest())

    def seal(self, record: dict[str, Any], seconds: float, purpose: bytes) -> str:
        """``record`` sealed for ``seconds``, as a cookie-safe string."""
        plain = json.dumps({**record, "exp": time.time() + seconds}, separators=(",", ":")).encode()
        nonce = os.urandom(12)
        sealed = nonce + self._aead.encrypt(nonce, plain, purpose)
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode("ascii")

    def open(self, value: str, purpose: bytes) -> dict[str, Any] | None:
        """The record sealed in ``value`` for ``purpose``, if it is intact and unexpired."""
        if not value or len(value) > _MAX:
            return None
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
            record = json.loads(self._aead.decrypt(raw[:12], raw[12:], purpose))
        except (ValueError, InvalidTag):
            return None
        if not isinstance(record, dict) or not isinstance(record.get("exp"), (int, float)):
            return None
        return record if record["exp"] > time.time() else None


def identity_record(identity: Identity, via: str) -> dict[str, Any]:
    """What the identity cookie holds: the identity as rules see it, and how it signed in."""
    return {"n": identity.name, "k": identity.kind, "s": identity.subject, "c": identity.client_id,
            "i": identity.issuer, "sc": sorted(identity.scopes), "g": sorted(identity.groups),
            "a": sorted(identity.attributes), "via": via}


def identity_of(record: dict[str, Any]) -> Identity | None:
    """The identity an opened identity cookie names (None for a malformed record)."""
    try:
        kind = record["k"]
        if kind not in _KINDS:
            return None
        return Identity(
            name=str(record["n"]), kind=cast(Kind, kind),
            subject=None if record["s"] is None else str(record["s"]),
            client_id=None if record["c"] is None else str(record["c"]),
            issuer=None if record["i"] is None else str(record["i"]),
            scopes=frozenset(str(s) for s in record["sc"]),
            groups=frozenset(str(g) for g in record["g"]),
            expires_at=float(record["exp"]),
            attributes=frozenset(str(a) for a in record["a"]))
    except (KeyError, TypeError, ValueError):
        return None
