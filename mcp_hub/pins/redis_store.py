"""Tool pins in Redis, so every replica agrees on trust on first use.

The same :class:`~mcp_hub.pins.pinning.PinStore` (fingerprints, changes, policies),
with its file replaced by two keys: ``<prefix>:pins`` holds the JSON the file
would hold and ``<prefix>:pins:version`` counts writes, so a replica re-reads
only what changed (as the file store compares its ``stat``). Writes happen
under a Redis lock, as the file store's happen under a file lock. A pin
accepted on one replica (``mcp-hub pins accept`` with the same ``[state] url``)
is seen by the others at their next periodic re-read.

The store is synchronous like the file store; the client's timeouts are short,
and a Redis that does not answer raises :class:`~mcp_hub.pins.pinning.PinError`, which
the hub logs without taking an upstream down.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from redis.exceptions import RedisError

from mcp_hub.pins.pinning import PinError, PinState, PinStore
from mcp_hub.state.redis_backend import safe_url

__all__ = ["RedisPinStore"]

_FORMAT_VERSION = 1

logger = logging.getLogger(__name__)


class RedisPinStore(PinStore):
    """A :class:`PinStore` whose pin file is a Redis key."""

    def __init__(self, url: str, *, prefix: str = "mcp-hub", **kwargs: Any) -> None:
        self.url = url
        self._client = redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=2.0)
        self._data_key = f"{prefix}:pins"
        self._version_key = f"{prefix}:pins:version"
        self._stale = False
        # Redis not reachable at start: the store begins empty (logged) and the periodic
        # re-read loads the pins once it answers.
        super().__init__(Path(safe_url(url)), **kwargs)

    def _load_if_changed(self) -> bool:
        try:
            changed = super()._load_if_changed()
        except PinError as exc:
            # Redis is down: keep checking against the last copy read (said once);
            # recording a new pin fails (PinError from the write) and is logged.
            if not self._stale:
                logger.warning("pins: %s; checking against the last copy", exc)
            self._stale = True
            return False
        self._stale = False
        return changed

    def _failed(self, exc: Exception) -> PinError:
        return PinError(f"shared pin store {safe_url(self.url)} unavailable: {type(exc).__name__}")

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        lock = self._client.lock(f"{self._data_key}:lock", timeout=30, blocking_timeout=10)
        try:
            acquired = lock.acquire()
        except RedisError as exc:
            raise self._failed(exc) from None
        if not acquired:
            raise PinError("shared pin store: timed out waiting for the lock")
        try:
            yield
        finally:
            with contextlib.suppress(RedisError):
                lock.release()

    def _stat(self) -> tuple[int, int] | None:
        try:
            version = self._client.get(self._version_key)
        except RedisError as exc:
            raise self._failed(exc) from None
        return None if version is None else (int(version), 0)  # type: ignore[arg-type]

    def _read(self) -> PinState:
        try:
            text = self._client.get(self._data_key)
        except RedisError as exc:
            raise self._failed(exc) from None
        if text is None:
            return PinState()
        try:
            data = json.loads(text)  # type: ignore[arg-type]
        except ValueError as exc:
            raise PinError(f"shared pin store: not valid JSON ({exc})") from None
        servers = data.get("servers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            raise PinError("shared pin store: no 'servers' object")
        return PinState({str(k): dict(v) for k, v in servers.items() if isinstance(v, dict)})

    def _write(self, state: PinState) -> None:
        text = b"".join(self._dump(state))
        try:
            with self._client.pipeline(transaction=True) as pipe:
                pipe.set(self._data_key, text)
                pipe.incr(self._version_key)
                pipe.execute()
        except RedisError as exc:
            raise self._failed(exc) from None

