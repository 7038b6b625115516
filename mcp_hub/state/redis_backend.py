"""The Redis backend (redis-py's asyncio client), for hub replicas sharing state.

Every key lives under one prefix (``mcp-hub:`` by default). The bus is one
pub/sub channel, ``<prefix>:bus``. When Redis stops answering, each call raises
:class:`~mcp_hub.state.base.StateUnavailable`, :attr:`RedisState.available`
turns False (``/readyz``, ``/status.json`` and ``hub_status`` show it, the log
says it once) and a health check pings every second until Redis is back; the
bus then subscribes again by itself.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, NoReturn
from urllib.parse import urlsplit

import anyio
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from mcp_hub.state.base import BusHandler, StateBackend, StateUnavailable

__all__ = ["RedisState"]

logger = logging.getLogger(__name__)

# Sliding window on Redis's own clock (replicas' clocks may differ): drop hits older
# than the window, count, add this one if below the limit.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[1]) * 1000))
return 1
"""


def safe_url(url: str) -> str:
    """``url`` without its password, for logs and status."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class RedisState(StateBackend):
    """State in one Redis database, shared by every replica pointed at it."""

    kind = "redis"
    shared = True

    def __init__(self, url: str, *, prefix: str = "mcp-hub", timeout: float = 1.0) -> None:
        self.url = url
        self.prefix = prefix
        self.client: aioredis.Redis = aioredis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._available = True
        self._last_error: str | None = None
        self._down_since: float | None = None
        self._handler: BusHandler | None = None
        self._subscribed = False
        self._seq = 0
        self._token = os.urandom(6).hex()  # makes this process's hits distinct members
        self._admit_script = self.client.register_script(_ADMIT)

    def key(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    @property
    def available(self) -> bool:
        return self._available

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"backend": self.kind, "url": safe_url(self.url),
                                "available": self._available, "bus_subscribed": self._subscribed}
        if not self._available:
            body["error"] = self._last_error
            if self._down_since is not None:
                body["down_seconds"] = round(time.monotonic() - self._down_since, 1)
        return body

    def _failed(self, exc: BaseException) -> NoReturn:
        if self._available:
            logger.error("shared state: Redis at %s is unreachable (%s); calls that need it "
                         "fail until it is back", safe_url(self.url), type(exc).__name__)
            self._down_since = time.monotonic()
        self._available = False
        self._last_error = f"{type(exc).__name__}: {str(exc)[:200]}"
        raise StateUnavailable(f"shared state (Redis) unavailable: {type(exc).__name__}") from None

    def _ok(self) -> None:
        if not self._available:
            logger.warning("shared state: Redis at %s is reachable again", safe_url(self.url))
        self._available = True
        self._last_error = None
        self._down_since = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._health_loop)
            tg.start_soon(self._bus_loop)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
        await self.client.aclose()

    async def _health_loop(self) -> None:
        while True:
            await anyio.sleep(1.0 if not self._available else 2.0)
            try:
                await self.client.ping()
            except (RedisError, OSError) as exc:
                with suppress(StateUnavailable):
                    self._failed(exc)
            else:
                self._ok()

    async def _bus_loop(self) -> None:
        channel = self.key("bus")
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(channel)
                self._subscribed = True
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None and self._handler is not None:
                        await self._deliver(message.get("data"))
            except (RedisError, OSError) as exc:
                self._subscribed = False
                logger.debug("shared state bus: %s; subscribing again", exc)
                await anyio.sleep(0.5)
            finally:
                with anyio.CancelScope(shield=True):
                    with suppress(RedisError, OSError):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _deliver(self, data: Any) -> None:
        assert self._handler is not None
        if isinstance(data, bytes):
            try:
                await self._handler(data)
            except Exception:
                logger.exception("shared state bus: a message handler failed")

    # -- the interface ------------------------------------------------------------------
    async def get(self, key: str) -> bytes | None:
        try:
            value = await self.client.get(self.key(key))
        except (RedisError, OSError) as exc:
            self._failed(exc)
        self._ok()
        return value if isinstance(value, bytes) else None

    async def put(self, key: str, value: bytes, ttl: float | None = None) -> None:
        try:
            await self.client.set(self.key(key), value,
                                  px=None if ttl is None else int(ttl * 1000))
        except (RedisError, OSError) as exc:
            self._failed(exc)
        self._ok()

    async def put_if_absent(self, key: str, value: bytes, ttl: float | None) -> bool:
        try:
            stored = await self.client.set(self.key(key), value, nx=True,
                                           px=None if ttl is None else max(1, int(ttl * 1000)))
        except (RedisError, OSError) as exc:
            self._failed(exc)
        self._ok()
        return bool(stored)

    async def take(self, key: str) -> bytes | None:
        try:
            value = await self.client.getdel(self.key(key))
        except (RedisError, OSError) as exc:
            self._failed(exc)
        self._ok()
        return value if isinstance(value, bytes) else None

    async def delete(self, key: str) -> None:
        try:
            await self.client.delete(self.key(key))
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def set_add(self, key: str, member: str, ttl: float | None = None) -> None:
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.sadd(self.key(key), member)
                if ttl is not None:
                    pipe.pexpire(self.key(key), int(ttl * 1000))
                await pipe.execute()
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def set_remove(self, key: str, member: str) -> None:
        try:
            await self.client.srem(self.key(key), member)
        except (RedisError, OSError) as exc:
            self._failed(exc)

    async def set_members(self, key: str) -> set[str]:
        try:
            members = await self.client.smembers(self.key(key))
        except (RedisError, OSError) as exc:
            self._failed(exc)
        return {m.decode() if isinstance(m, bytes) else str(m) for m in members}

    async def admit(self, key: str, limit: int, window: float) -> bool:
        self._seq += 1
        try:
            admitted = await self._admit_script(
                keys=[self.key(key)], args=[window, limit, f"{self._token}:{self._seq}"])
        except (RedisError, OSError) as exc:
            self._failed(exc)
        self._ok()
        return bool(admitted)

    async def publish(self, data: bytes) -> None:
        try:
            await self.client.publish(self.key("bus"), data)
        except (RedisError, OSError) as exc:
            self._failed(exc)

    def on_message(self, handler: BusHandler) -> None:
        self._handler = handler
