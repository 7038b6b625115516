"""Encryption at rest for stored tokens: Fernet (AES-128-CBC + HMAC-SHA256).

The key comes from ``MCP_HUB_SECRET_KEY`` when set (a Fernet key, or any
passphrase, which is stretched with SHA-256), otherwise from a key file created
with mode 0600 under the hub's state dir on first use. Every replica that shares
a state backend must share the key, so set ``MCP_HUB_SECRET_KEY`` there.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from mcp_hub.upstream.oauth.errors import OAuthError

__all__ = ["KEY_ENV", "SecretBox", "key_file", "key_from_env", "load_key"]

KEY_ENV = "MCP_HUB_SECRET_KEY"
_KEY_FILE = "secret.key"


def _from_text(text: str) -> bytes:
    """A Fernet key as given, or one derived from a passphrase."""
    try:
        if len(base64.urlsafe_b64decode(text.encode())) == 32:
            return text.encode()
    except (binascii.Error, ValueError):
        pass
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())


def key_from_env() -> bool:
    """True when the key comes from ``MCP_HUB_SECRET_KEY`` (shared by replicas)."""
    return bool(os.environ.get(KEY_ENV, "").strip())


def key_file(state_dir: Path) -> Path:
    """Where the key is kept when ``MCP_HUB_SECRET_KEY`` is not set."""
    return state_dir / "oauth" / _KEY_FILE


def load_key(state_dir: Path) -> bytes:
    """The token key: from the environment, or the 0600 key file (created if missing)."""
    env = os.environ.get(KEY_ENV, "").strip()
    if env:
        return _from_text(env)
    path = key_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _from_text(path.read_text().strip())
    key = Fernet.generate_key()
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key


class SecretBox:
    """Encrypts and decrypts small blobs with one key."""

    def __init__(self, key: bytes, *, shared: bool = False) -> None:
        self._fernet = Fernet(key)
        #: The records are in a store other processes share (their key must be the same).
        self.shared = shared

    def seal(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def open(self, blob: bytes) -> bytes:
        try:
            return self._fernet.decrypt(blob)
        except InvalidToken:
            if self.shared:
                raise OAuthError(
                    "stored OAuth tokens cannot be decrypted with this process's key: they are "
                    f"in the shared state store, so every replica and `mcp-hub login` need the "
                    f"same {KEY_ENV}; set it everywhere, then log in again") from None
            raise OAuthError(
                f"stored OAuth tokens cannot be decrypted: {KEY_ENV} or the key file changed; "
                "log in again") from None
