"""Where encrypted OAuth records live: a small key-value interface and its file backend.

:class:`StateStore` is all the token store needs from a state backend: get, put,
put-if-absent and delete of opaque bytes by key. :class:`FileStateStore` is the embedded
backend (one 0600 file per key under ``<state dir>/oauth/``); a shared backend
such as Redis implements the same three methods so every replica sees the same
tokens.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol

import anyio

__all__ = ["FileStateStore", "StateStore"]


class StateStore(Protocol):
    """Bytes by key; values are already encrypted by the caller."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes) -> None: ...

    async def put_if_absent(self, key: str, value: bytes) -> bool:
        """Store ``value`` only if ``key`` has none, atomically across every process
        sharing the store: True if this call stored it."""
        ...

    async def delete(self, key: str) -> bool: ...


class FileStateStore:
    """One file per key in a 0700 folder; writes are atomic (temp file + rename)."""

    kind = "embedded"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: Where the tokens are, for messages and status.
        self.where = f"files under {folder}"

    def _path(self, key: str) -> Path:
        # Keys carry server names and identities: hash them into safe file names.
        return self.folder / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".bin")

    async def get(self, key: str) -> bytes | None:
        try:
            return await anyio.Path(self._path(key)).read_bytes()
        except FileNotFoundError:
            return None

    async def put(self, key: str, value: bytes) -> None:
        await anyio.to_thread.run_sync(self._write, self._path(key), value)

    async def put_if_absent(self, key: str, value: bytes) -> bool:
        return await anyio.to_thread.run_sync(self._write, self._path(key), value, True)

    def _write(self, path: Path, value: bytes, only_new: bool = False) -> bool:
        """Write ``value`` complete under a temporary name, then give it ``path``: by
        rename (replacing), or with ``only_new`` by hard link, which fails if ``path``
        exists (so of two writers exactly one stores its value)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:  # mkstemp creates it 0600
                fh.write(value)
            if not only_new:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links: exclusive create instead
                return self._create(path, value)
            return True
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @staticmethod
    def _create(path: Path, value: bytes) -> bool:
        """``value`` in a new ``path`` (0600), False if it exists."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as fh:
            fh.write(value)
        return True

    async def delete(self, key: str) -> bool:
        try:
            await anyio.Path(self._path(key)).unlink()
        except FileNotFoundError:
            return False
        return True
