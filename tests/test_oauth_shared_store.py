"""OAuth tokens in the shared state store (``[state] url``): a real redis-server, the real
authorization server (oauth2-mock-server) and the SDK-built protected upstream.

Two hub configs share one Redis but have separate state dirs, so nothing can pass
between them through files: ``mcp-hub login`` through one stores the tokens in
Redis, a hub started from the other (already running, waiting in ``needs_login``)
picks them up without a restart, and a third process uses them from the CLI.
Redis holds only sealed values: the actual tokens, read back through the store,
are nowhere in a scan of every key and value.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.upstream.oauth.attach import token_store
from tests.oauth_parts import auth_server, hub_cli, login, protected_server, readable_token
from tests.system_services import RedisServer, free_port, redis_server, require_binary
from tests.test_oauth_upstream import _call, _state, _until_needs_login

pytestmark = pytest.mark.anyio


@pytest.fixture
def shared_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The MCP_HUB_SECRET_KEY every process shares (subprocesses inherit it)."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("MCP_HUB_SECRET_KEY", key)
    yield key


def _config(tmp: Path, name: str, url: str, redis_url: str, startup: int = 20) -> Path:
    folder = tmp / name
    folder.mkdir()
    path = folder / "servers.toml"
    path.write_text(f'[hub]\nstate_dir = "{folder / "state"}"\nstartup_timeout = {startup}\n\n'
                    f'[state]\nurl = "{redis_url}"\n\n'
                    f'[servers.prot]\nurl = "{url}"\nauth = "oauth"\nprefix = "p"\n'
                    f'connect_timeout = 10\n')
    return path


async def _redis_dump(url: str) -> list[bytes]:
    """Every key and every value in the database."""
    client = aioredis.from_url(url)
    found: list[bytes] = []
    try:
        async for key in client.scan_iter(match="*"):
            found.append(key)
            if await client.type(key) == b"string":
                value = await client.get(key)
                if value is not None:
                    found.append(value)
    finally:
        await client.aclose()
    return found


async def test_login_through_one_config_serves_another_hub_via_redis(
        tmp_path: Path, shared_key: str) -> None:
    async with redis_server(tmp_path) as redis:
        with auth_server(token_seconds=3) as auth, \
                protected_server(auth.url, tmp_path / "calls.txt") as url:
            first = _config(tmp_path, "a", url, redis.url)
            second = _config(tmp_path, "b", url, redis.url)
            config_b = load_config(second)
            async with Hub(config_b, load_plugin_modules=False) as hub:
                with anyio.fail_after(60):
                    await hub.wait_ready(20)
                    assert _state(hub) == "needs_login"
                    shown = hub.status()["oauth"]
                    assert shown["token_store"] == {"backend": "redis", "where": f"Redis at {redis.url}",
                                                    "key": "MCP_HUB_SECRET_KEY"}
                    assert shown["clients"] == {"prot": "dynamic"}
                    # Log in through the other config (another process, another state dir).
                    _, err = await anyio.to_thread.run_sync(login, first)
                    assert "Redis at redis://127.0.0.1" in err
                    while _state(hub) != "ready":  # picked up without a restart
                        await anyio.sleep(0.1)
                    # Calls keep working across refreshes; the refreshed tokens go to Redis.
                    while auth.stats()["token"].get("refresh_token", 0) < 2:
                        ok, text = await _call(hub)
                        assert ok, text
                        await anyio.sleep(0.5)  # let the 3-second token age
            # A third process, from the second config, uses the refreshed tokens from Redis.
            called = await anyio.to_thread.run_sync(hub_cli, second, "call", "p_whoami")
            assert called.returncode == 0, called.stderr
            assert "sub=" in called.stdout

            store = token_store("prot", config_b.servers["prot"])
            tokens = await store.get_tokens()
            client = await store.get_client_info()
            assert tokens is not None and tokens.refresh_token and client is not None
            canaries = [tokens.access_token.encode(), tokens.refresh_token.encode(),
                        client.client_id.encode()]
            dump = await _redis_dump(redis.url)
            assert any(k.startswith(b"mcp-hub:oauth/prot/") for k in dump)
            for item in dump:
                for canary in canaries:
                    assert canary not in item
                assert not readable_token(item)
            # No token files in either state dir: Redis is the only store.
            for name in ("a", "b"):
                assert not list((tmp_path / name / "state").glob("oauth/*.bin"))

            out = await anyio.to_thread.run_sync(hub_cli, first, "logout", "prot")
            assert out.returncode == 0 and "deleted from Redis at" in out.stderr
            assert not [k for k in await _redis_dump(redis.url) if k.endswith(b"/tokens")]
            checked = await anyio.to_thread.run_sync(hub_cli, second, "check")
            assert "needs_login" in checked.stdout
            assert (f"oauth tokens: Redis at {redis.url} (encrypted, key: MCP_HUB_SECRET_KEY); "
                    "clients: prot: dynamic") in checked.stdout
            assert shared_key not in checked.stdout + checked.stderr


async def test_logout_reaches_every_replica_through_redis(tmp_path: Path,
                                                          shared_key: str) -> None:
    """Two running hubs (replicas: separate state dirs, one Redis) serve the server;
    ``mcp-hub logout`` from a third process deletes the tokens in Redis, and within
    seconds both show ``needs_login`` and neither sends a call upstream."""
    calls = tmp_path / "calls.txt"
    async with redis_server(tmp_path) as redis:
        with auth_server(token_seconds=600) as auth, protected_server(auth.url, calls) as url:
            first = _config(tmp_path, "a", url, redis.url)
            second = _config(tmp_path, "b", url, redis.url)
            await anyio.to_thread.run_sync(login, first)
            async with Hub(load_config(first), load_plugin_modules=False) as hub_a, \
                    Hub(load_config(second), load_plugin_modules=False) as hub_b:
                with anyio.fail_after(90):
                    await hub_a.wait_ready(20)
                    await hub_b.wait_ready(20)
                    for hub in (hub_a, hub_b):
                        ok, text = await _call(hub)
                        assert ok, text
                    served = calls.read_text().count("\n")
                    out = await anyio.to_thread.run_sync(hub_cli, second, "logout", "prot")
                    assert out.returncode == 0 and "deleted from Redis at" in out.stderr
                    took = [await _until_needs_login(hub) for hub in (hub_a, hub_b)]
                    for hub in (hub_a, hub_b):
                        assert _state(hub) == "needs_login"
                        ok, text = await _call(hub)
                        assert not ok and "mcp-hub login prot" in text, text
                    assert calls.read_text().count("\n") == served
    print(f"logout reached the replicas after {took[0]:.2f} s and {sum(took):.2f} s")


async def test_redis_down_is_reported_and_a_login_fails_loudly(
        tmp_path: Path, shared_key: str) -> None:
    down = RedisServer("", free_port(), tmp_path)  # never started: nothing listens there
    with auth_server(token_seconds=60) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        config_path = _config(tmp_path, "a", url, down.url, startup=5)
        # The login cannot store its tokens: it fails, naming the store, and says nothing
        # about success.
        proc = await anyio.to_thread.run_sync(
            lambda: hub_cli(config_path, "login", "prot", "--no-browser", "--timeout", "20"))
        assert proc.returncode != 0
        assert "token store unavailable (Redis at redis://127.0.0.1" in proc.stderr
        assert "logged in" not in proc.stderr
        assert auth.token_requests() == 0
        # A running hub shows the store's error for the server, not a login prompt.
        async with Hub(load_config(config_path), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                upstream = next(u for u in hub.status()["upstreams"] if u["name"] == "prot")
                assert upstream["state"] != "ready"
                assert "token store unavailable" in str(upstream.get("last_error")), upstream


async def test_replicas_without_the_shared_key_are_told_to_set_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_HUB_SECRET_KEY", raising=False)
    async with redis_server(tmp_path) as redis:
        with auth_server(token_seconds=60) as auth, \
                protected_server(auth.url, tmp_path / "calls.txt") as url:
            first = _config(tmp_path, "a", url, redis.url)
            second = _config(tmp_path, "b", url, redis.url, startup=5)
            _, err = await anyio.to_thread.run_sync(login, first)
            assert "MCP_HUB_SECRET_KEY is not set" in err  # the warning at login
            called = await anyio.to_thread.run_sync(hub_cli, second, "call", "p_whoami")
            assert called.returncode != 0
            assert "same MCP_HUB_SECRET_KEY" in called.stdout + called.stderr
    assert os.environ.get("MCP_HUB_SECRET_KEY") is None


async def test_fresh_tokens_survive_an_outage_in_memory_and_are_written_after(
        tmp_path: Path, shared_key: str) -> None:
    """A refresh while Redis is down: the new tokens are used, not lost, and stored once
    Redis answers again (the refresh token may already be rotated at the server)."""
    from mcp.shared.auth import OAuthToken

    from mcp_hub.upstream.oauth.secretbox import SecretBox
    from mcp_hub.upstream.oauth.shared_store import RedisTokenBackend
    from mcp_hub.upstream.oauth.tokens import TokenStore

    redis = RedisServer(require_binary("redis-server"), free_port(), tmp_path)
    backend = RedisTokenBackend(redis.url)
    store = TokenStore(backend, SecretBox(shared_key.encode(), shared=True), "prot",
                       "https://mcp.example.test/mcp")
    fresh = OAuthToken(access_token="canary-access-7f3e", refresh_token="canary-refresh-9b1d",
                       expires_in=3600)
    with anyio.fail_after(30):
        await store.set_tokens(fresh)  # Redis is not running: kept in memory, logged
        assert store.unsaved is not None
        assert await store.get_tokens() == fresh
        assert await store.has_tokens()
        await redis.start()
        try:
            assert await store.get_tokens() == fresh  # written on this first chance
            assert store.unsaved is None
            again = TokenStore(backend, SecretBox(shared_key.encode(), shared=True), "prot",
                               "https://mcp.example.test/mcp")
            assert await again.get_tokens() == fresh  # a fresh reader finds them in Redis
            for item in await _redis_dump(redis.url):
                assert b"canary-" not in item
        finally:
            await redis.stop()
