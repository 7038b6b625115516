"""On-behalf-of: each signed-in caller reaches a token-exchange upstream as itself.

Real processes only: the hub's identity provider (oauth2-mock-server,
``tests/fixtures/oauth_server.mjs``) signs the callers' access tokens; the
upstream's authorization server (oauth2-mock-server with an RFC 8693 grant,
``tests/fixtures/oauth/exchange_server.mjs``) verifies them against the IdP's
keys and issues its own; the upstream (``tests/fixtures/oauth/protected_server.py``)
accepts only the latter and records each caller's ``sub``; redis-server; two hub
replicas sharing it.

``[servers.prot.oauth] grant = "token_exchange"``, ``subject = "caller"``: alice on
replica A and bob on replica B each reach the upstream as themselves, alice's
next call on replica B reuses the token replica A obtained (stored sealed in Redis:
no second exchange), and mallory, whose exchange the authorization server refuses,
gets an error naming the upstream and the server's ``invalid_grant``, one refused
request per call, and nothing reaches the upstream in her name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet

from tests.auth_support import AuthServer, bearer, oauth_server
from tests.exchange_parts import ExchangeServer, exchange_config, exchange_server, whoami
from tests.hubtest import HttpHub, http_hub, text_of
from tests.oauth_parts import protected_server, readable_token
from tests.system_services import redis_server

pytestmark = pytest.mark.anyio



@pytest.fixture
def shared_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The MCP_HUB_SECRET_KEY both hub processes share (they inherit it)."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("MCP_HUB_SECRET_KEY", key)
    yield key


async def sealed_values(redis_url: str) -> list[bytes]:
    client = aioredis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter() if b"oauth/" in k]
        return [v for v in [await client.get(k) for k in keys] if v is not None]
    finally:
        await client.aclose()


async def test_two_identities_reach_the_upstream_as_themselves_across_replicas(
        tmp_path: Path, shared_key: str) -> None:
    calls = tmp_path / "calls.txt"
    async with redis_server(tmp_path) as redis, oauth_server() as idp:
        with exchange_server(idp.issuer) as upstream_as, \
                protected_server(upstream_as.url, calls) as upstream:
            config = exchange_config(tmp_path, upstream, idp.issuer, upstream_as.url, redis.url)
            (tmp_path / "a").mkdir()
            (tmp_path / "b").mkdir()
            async with http_hub(config, tmp_path / "a") as a, \
                    http_hub(config, tmp_path / "b") as b:
                with anyio.fail_after(120):
                    await _scenario(a, b, idp, upstream_as, upstream, redis.url, calls)


async def _scenario(a: HttpHub, b: HttpHub, idp: AuthServer, upstream_as: ExchangeServer,
                    upstream: str, redis_url: str, calls: Path) -> None:
    alice, bob = await bearer(idp, "alice"), await bearer(idp, "bob")
    result = await whoami(a, alice)
    assert not result.is_error and text_of(result).startswith("sub=alice "), text_of(result)
    result = await whoami(b, bob)
    assert not result.is_error and text_of(result).startswith("sub=bob "), text_of(result)
    # Alice again, on the other replica: the token replica A obtained, from Redis.
    result = await whoami(b, alice)
    assert not result.is_error and text_of(result).startswith("sub=alice "), text_of(result)
    stats = upstream_as.stats()
    assert stats["exchanges"] == {"alice": 1, "bob": 1}, stats
    assert set(stats["resources"]) == {upstream}, stats
    assert set(stats["subject_types"]) == {"urn:ietf:params:oauth:token-type:access_token"}
    assert [line.split()[1] for line in calls.read_text().splitlines()] == [
        "alice", "bob", "alice"]
    # Redis holds the exchanged tokens sealed (Fernet), never a readable token.
    values = await sealed_values(redis_url)
    assert values and all(v.startswith(b"gAAAAA") and not readable_token(v) for v in values)

    # A refused exchange: the call's error names the upstream and the server's error;
    # one token request per call (no retry loop), nothing sent upstream in her name.
    upstream_as.refuse("mallory")
    mallory = await bearer(idp, "mallory")
    for attempt in (1, 2):
        result = await whoami(a, mallory)
        assert result.is_error, text_of(result)
        assert "prot" in text_of(result) and "invalid_grant" in text_of(result), text_of(result)
        assert upstream_as.stats()["refused"] == attempt
    assert "mallory" not in calls.read_text()
    for hub in (a, b):  # the caller's own token never appears in a log
        assert mallory["Authorization"].split()[1] not in hub.stderr()
        assert alice["Authorization"].split()[1] not in hub.stderr()

