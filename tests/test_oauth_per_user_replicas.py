"""Per-user OAuth behind a round-robin balancer: two hub processes sharing a real Redis.

The connect link, the page and the callback may each reach a different replica.
Alice signs in to the hub on hub A; her link is issued by hub A, opened on hub B
(which accepts A's identity cookie: both derive its key from the shared
``MCP_HUB_SECRET_KEY``), and the authorization server's redirect lands on hub A.
Bob's link is issued by hub B, opened on hub A, and the redirect lands on hub A
too, so B's waiting call learns of the connect from the shared store alone. Both
calls then reach the upstream with each person's own token; a used link is
refused on either hub; Redis never holds the flow's record in plain text and
forgets it once the callback took it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet
from mcp import types
from mcp.types import TextContent

from tests.auth_support import AuthServer, oauth_server
from tests.hubtest import HttpHub, http_hub, http_session
from tests.oauth_parts import auth_server, protected_server
from tests.system_services import redis_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def shared_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The MCP_HUB_SECRET_KEY both hub processes share (they inherit it)."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("MCP_HUB_SECRET_KEY", key)
    yield key


def _config(tmp: Path, upstream: str, issuer: str, redis_url: str) -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 20\n\n'
        f'[state]\nurl = "{redis_url}"\n\n'
        f'[servers.prot]\nurl = "{upstream}"\nauth = "oauth"\noauth_per_user = true\n'
        f'prefix = "p"\nconnect_timeout = 10\n\n'
        f'[auth]\nissuer = "{issuer}"\n\n[auth.browser]\nclient_id = "hub-browser"\n')
    return path


def _on(url: str, hub: HttpHub) -> str:
    """``url`` sent to ``hub`` instead: what a round-robin balancer may do."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=urlsplit(hub.base).netloc))


def _text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, TextContent))


class SplitBrowser:
    """Signs in to the hub on ``callback_hub`` as ``hub_sub``, opens the connect page on
    ``page_hub`` (which accepts the other replica's identity cookie) and brings the
    redirect back to ``callback_hub``."""

    def __init__(self, upstream_as: str, sub: str, page_hub: HttpHub, callback_hub: HttpHub,
                 redis_url: str, hub_as: AuthServer, hub_sub: str) -> None:
        self.upstream_as, self.sub = upstream_as, sub
        self.hub_as, self.hub_sub = hub_as, hub_sub
        self.cookies = httpx2.Cookies()
        self.page_hub, self.callback_hub, self.redis_url = page_hub, callback_hub, redis_url
        self.urls: list[str] = []
        self.flow_values: list[bytes] = []
        self.done: list[httpx2.Response] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        self.urls.append(params.url)
        await self.hub_as.login(self.hub_sub)
        async with httpx2.AsyncClient(timeout=30, cookies=self.cookies) as http:
            (await http.post(f"{self.upstream_as}/test/subject",
                             json={"sub": self.sub})).raise_for_status()
            signed_in = await http.get(f"{self.callback_hub.base}/login?next=/",
                                       follow_redirects=True)
            assert signed_in.status_code == 200, signed_in.text
            page = await http.get(_on(params.url, self.page_hub))
            assert page.status_code == 302, page.text
            self.flow_values = await _values(self.redis_url, b"peruser/flow/")
            at_as = await http.get(page.headers["location"])
            assert at_as.status_code in (302, 303), at_as.text
            back = at_as.headers["location"]
            assert back.startswith(f"{self.page_hub.base}/connect/callback?")
            self.done.append(await http.get(_on(back, self.callback_hub)))
            self.cookies = http.cookies
        return types.ElicitResult(action="accept")


async def _values(redis_url: str, marker: bytes) -> list[bytes]:
    client = aioredis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter() if marker in k]
        return [v for v in [await client.get(k) for k in keys] if v is not None]
    finally:
        await client.aclose()


async def _connect_then_call(hub: HttpHub, headers: dict[str, str], browser: SplitBrowser) -> str:
    async with http_session(hub.mcp_url, headers=headers,
                            elicitation_callback=browser.elicit) as session:
        listed = [t.name for t in (await session.list_tools()).tools if t.name.startswith("p_")]
        if listed == ["p_connect"]:
            connected = await session.call_tool("p_connect", {})
            assert not connected.is_error and "Connected to prot" in _text(connected)
        result = await session.call_tool("p_whoami", {})
        assert not result.is_error, _text(result)
        return _text(result)


async def test_link_page_and_callback_on_different_replicas(tmp_path: Path, shared_key: str
                                                            ) -> None:
    async with redis_server(tmp_path) as redis:
        with auth_server(token_seconds=600) as upstream_as, \
                protected_server(upstream_as.url, tmp_path / "calls.txt") as upstream:
            async with oauth_server() as auth:
                config = _config(tmp_path, upstream, auth.issuer, redis.url)
                (tmp_path / "a").mkdir()
                (tmp_path / "b").mkdir()
                async with http_hub(config, tmp_path / "a") as a, \
                        http_hub(config, tmp_path / "b") as b:
                    with anyio.fail_after(120):
                        await _scenario(a, b, auth, upstream_as.url, redis.url)


async def _bearer(auth: AuthServer, hub: HttpHub, sub: str) -> dict[str, str]:
    # Both replicas serve one public URL; the audience is the MCP endpoint's.
    return {"Authorization": f"Bearer {await auth.token(sub=sub, aud=f'{hub.base}/mcp', scope='mcp')}"}


async def _scenario(a: HttpHub, b: HttpHub, auth: AuthServer, upstream_as: str,
                    redis_url: str) -> None:
    alice = SplitBrowser(upstream_as, "gh-alice", page_hub=b, callback_hub=a, redis_url=redis_url,
                         hub_as=auth, hub_sub="alice")
    text = await _connect_then_call(a, await _bearer(auth, a, "alice"), alice)
    assert text.startswith("sub=gh-alice "), text
    assert alice.urls[0].startswith(f"{a.base}/connect/prot?t="), "hub A issued the link"
    assert alice.done[0].status_code == 200 and "Connected to prot" in alice.done[0].text

    bob = SplitBrowser(upstream_as, "gh-bob", page_hub=a, callback_hub=a, redis_url=redis_url,
                       hub_as=auth, hub_sub="bob")
    text = await _connect_then_call(b, await _bearer(auth, b, "bob"), bob)
    assert text.startswith("sub=gh-bob "), text
    assert bob.urls[0].startswith(f"{b.base}/connect/prot?t="), "hub B issued the link"

    # A used link is refused on either replica, whichever issued it, to its own owner too.
    for browser in (alice, bob):
        async with httpx2.AsyncClient(timeout=30, cookies=browser.cookies) as http:
            for hub in (a, b):
                again = await http.get(_on(browser.urls[0], hub))
                assert again.status_code == 403 and "already used" in again.text, again.text
    # While a flow was in progress Redis held its record sealed (a Fernet token, nothing
    # readable); the callback took it, so none is left.
    for value in alice.flow_values + bob.flow_values:
        assert value.startswith(b"gAAAAA") and b"alice" not in value and b"bob" not in value
    assert len(alice.flow_values) == 1 and len(bob.flow_values) == 1
    assert await _values(redis_url, b"peruser/flow/") == []
