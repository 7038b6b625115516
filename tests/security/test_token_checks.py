"""Token checks that anyone on the network can lean on, against a real hub and a real
authorization server (oauth2-mock-server): the audience comes from the config, never
from ``Host`` or ``X-Forwarded-*``; made-up ``kid``s cannot stall a rotated key;
made-up opaque tokens cannot flood the introspection endpoint; a token that names
nobody is refused instead of becoming a shared identity.

The authorization server counts the key-set fetches and introspection requests it
serves, so the bounds are asserted as counts, not as times.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError
from tests.auth_support import AuthServer, oauth_server
from tests.hubtest import HttpHub, echo_server_toml, http_hub, write_config

pytestmark = pytest.mark.anyio

AUDIENCE = "https://hub.example.com/mcp"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(tmp: Path, issuer: str, *, auth: str = "", http: str = "") -> Path:
    body = (echo_server_toml("echo") + f'\n[auth]\nissuer = "{issuer}"\n{auth}\n'
            '[profiles.dev]\ntoolsets = ["mcp-echo"]\n')
    return write_config(tmp, body, hub=f"[hub.http]\nmax_connections_per_ip = 1000\n{http}\n")


async def _post(client: httpx2.AsyncClient, hub: HttpHub, token: str, path: str = "/mcp",
                **headers: str) -> httpx2.Response:
    sent = {**HEADERS, "Authorization": f"Bearer {token}", **headers}
    return await client.post(f"{hub.base}{path}", json=INIT, headers=sent)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _made_up(kid: str) -> str:
    """A JWT naming ``kid`` with a signature of random bytes."""
    now = int(time.time())
    head = {"alg": "RS256", "typ": "JWT", "kid": kid}
    body = {"iss": "x", "sub": "mallory", "aud": AUDIENCE, "exp": now + 300}
    return ".".join([_b64(json.dumps(head).encode()), _b64(json.dumps(body).encode()),
                     _b64(secrets.token_bytes(256))])


# ------------------------------------------------------------------ the audience

def test_auth_without_audience_or_public_url_does_not_start() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config('[auth]\nissuer = "https://idp.example.com"\n')
    assert "[auth] audience" in str(caught.value) and "[hub.http] public_url" in str(caught.value)
    parse_config('[auth]\nissuer = "https://idp.example.com"\naudience = "https://hub/mcp"\n')
    parse_config('[hub.http]\npublic_url = "https://hub"\n[auth]\nissuer = "https://idp.example.com"\n')
    with pytest.raises(ConfigError, match="trusted_proxies"):
        parse_config('[hub.http]\ntrusted_proxies = ["not-an-address"]\n')


async def test_the_audience_never_follows_host_or_forwarded_headers(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer, auth=f'audience = "{AUDIENCE}"\n')
            async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
                port = hub.port
                good = await auth.token(sub="alice", aud=AUDIENCE)
                assert (await _post(client, hub, good, "/p/dev/mcp")).status_code == 200
                # Tokens for other resources of the same issuer, each with the header that names them.
                tries = [
                    ("http://localhost:9000/p/dev/mcp", {"Host": "localhost:9000"}),
                    ("http://localhost:9000/mcp", {"Host": "localhost:9000"}),
                    (f"https://127.0.0.1:{port}/p/dev/mcp", {"X-Forwarded-Proto": "https"}),
                    ("https://proxy.example/p/dev/mcp",
                     {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "proxy.example"}),
                ]
                for aud, headers in tries:
                    token = await auth.token(sub="alice", aud=aud)
                    for path in ("/mcp", "/p/dev/mcp"):
                        response = await _post(client, hub, token, path, **headers)
                        assert response.status_code == 401, (aud, headers, path)
                        assert "another resource" in response.json()["error_description"]


async def test_forwarded_headers_count_only_from_trusted_proxies(tmp_path: Path) -> None:
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "hub.example.com"}
    well_known = "/.well-known/oauth-protected-resource/p/dev/mcp"
    token = "status-token-0123456789"
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            for trusted in (None, '"10.0.0.0/8"', '"127.0.0.0/8"'):
                tmp = tmp_path / f"t{len(trusted or '')}"
                tmp.mkdir()
                http = f'auth_tokens = ["{token}"]\n'
                if trusted is not None:
                    http += f"trusted_proxies = [{trusted}]\n"
                config = _config(tmp, auth.issuer, auth=f'audience = "{AUDIENCE}"\n', http=http)
                async with http_hub(config, tmp) as hub, httpx2.AsyncClient(timeout=30) as client:
                    doc = (await client.get(f"{hub.base}{well_known}", headers=forwarded)).json()
                    cookie = (await client.get(f"{hub.base}/?token={token}", headers=forwarded)
                              ).headers.get("set-cookie", "")
                if trusted == '"127.0.0.0/8"':
                    assert doc["resource"] == "https://hub.example.com/p/dev/mcp"
                    assert "Secure" in cookie
                else:  # the client is not a trusted proxy: its X-Forwarded-* mean nothing
                    assert doc["resource"] == f"{hub.base}/p/dev/mcp", trusted
                    assert cookie and "Secure" not in cookie, trusted


# ------------------------------------------------------------------ made-up kids

async def test_made_up_kids_cannot_stall_a_rotated_key(tmp_path: Path) -> None:
    """50 made-up ``kid``s a second arrive; a token signed by the key just rotated in is
    accepted at the first or second key-set fetch after it arrives, and the fetches stay
    about one a second (jwks_refresh_min_seconds) however many kids are made up."""
    flood, rate = 150, 50.0
    with anyio.fail_after(180):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer, auth=f'audience = "{AUDIENCE}"\n')
            async with http_hub(config, tmp_path) as hub, \
                    httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=400)) as many, \
                    httpx2.AsyncClient(timeout=60) as one:
                assert (await _post(one, hub, await auth.token(sub="alice", aud=AUDIENCE))).status_code == 200
                refused: list[int] = []
                started = time.monotonic()
                halfway = anyio.Event()
                rotated: dict[str, Any] = {}

                async def bogus(i: int) -> None:
                    refused.append((await _post(many, hub, _made_up(f"made-up-{i}"))).status_code)

                async def valid_after_rotation() -> None:
                    await halfway.wait()
                    await auth.rotate("k2")
                    token = await auth.token(sub="alice", aud=AUDIENCE)
                    before = (await auth.counts())["jwks"]
                    sent = time.monotonic()
                    with anyio.fail_after(20):  # the old queue took one second per kid ahead of it
                        rotated["status"] = (await _post(one, hub, token)).status_code
                    rotated["seconds"] = time.monotonic() - sent
                    rotated["fetches"] = (await auth.counts())["jwks"] - before

                async with anyio.create_task_group() as tg:
                    tg.start_soon(valid_after_rotation)
                    for i in range(flood):
                        tg.start_soon(bogus, i)
                        if i == flood // 3:
                            halfway.set()
                        await anyio.sleep(1 / rate)  # the pace of the flood, not a wait for anything
                elapsed = time.monotonic() - started
                fetches = (await auth.counts())["jwks"]
    print(f"rotated key accepted in {rotated['seconds']:.2f} s after {rotated['fetches']} fetch(es); "
          f"{fetches} key-set fetches for {flood} made-up kids in {elapsed:.1f} s")
    assert rotated["status"] == 200
    assert rotated["fetches"] <= 3
    assert refused == [401] * flood
    # One fetch per spacing at most (plus the first and one in flight), far fewer than the kids.
    assert fetches <= elapsed / 1.0 + 3 and fetches < flood / 3


async def test_an_unknown_kid_is_remembered_and_a_key_published_later_is_found(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer,
                             auth=f'audience = "{AUDIENCE}"\njwks_refresh_min_seconds = 0\n')
            async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
                assert (await _post(client, hub, await auth.token(sub="alice", aud=AUDIENCE))).status_code == 200
                assert (await _post(client, hub, _made_up("k3"))).status_code == 401
                counted = (await auth.counts())["jwks"]
                for _ in range(20):  # remembered: no fetch, however often it comes back
                    assert (await _post(client, hub, _made_up("k3"))).status_code == 401
                assert (await auth.counts())["jwks"] == counted
                # k3 is published; a fetch for another reason brings it, and k3 is found at once.
                await auth.rotate("k3")
                assert (await _post(client, hub, _made_up("another-kid"))).status_code == 401
                assert (await auth.counts())["jwks"] == counted + 1
                token = await auth.token(sub="alice", aud=AUDIENCE)
                assert (await _post(client, hub, token)).status_code == 200
                assert (await auth.counts())["jwks"] == counted + 1


# ------------------------------------------------------------------ introspection

def _from(address: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(timeout=30, transport=httpx2.AsyncHTTPTransport(local_address=address))


async def test_introspection_of_made_up_tokens_is_bounded_per_address(tmp_path: Path) -> None:
    """The defaults: a burst of 10 per address, one more a second (introspection_burst,
    introspection_per_minute)."""
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer, auth=f'audience = "{AUDIENCE}"\nintrospection = true\n')
            await auth.opaque("opaque-carol-0123456789", {"active": True, "sub": "carol",
                                                           "iss": auth.issuer})
            async with http_hub(config, tmp_path) as hub, _from("127.0.0.1") as flooder, \
                    _from("127.0.0.2") as other:
                assert (await _post(flooder, hub, "opaque-carol-0123456789")).status_code == 200
                started = time.monotonic()
                statuses: list[int] = []

                async def made_up() -> None:
                    response = await _post(flooder, hub, f"opaque-{secrets.token_hex(16)}")
                    statuses.append(response.status_code)
                    if response.status_code == 429:
                        assert int(response.headers["retry-after"]) >= 1

                async with anyio.create_task_group() as tg:
                    for _ in range(150):
                        tg.start_soon(made_up)
                elapsed = time.monotonic() - started
                asked = (await auth.counts())["introspect"] - 1  # carol's was the first
                # A token already known still works from the throttled address (no new introspection).
                assert (await _post(flooder, hub, "opaque-carol-0123456789")).status_code == 200
                # Another address has its own budget.
                await auth.opaque("opaque-dave-0123456789", {"active": True, "sub": "dave",
                                                              "iss": auth.issuer})
                assert (await _post(other, hub, "opaque-dave-0123456789")).status_code == 200
                # A token found inactive is remembered: asking again costs the server nothing.
                dead = "opaque-dead-0123456789"
                for _ in range(10):
                    assert (await _post(other, hub, dead)).status_code == 401
                after = (await auth.counts())["introspect"] - 1
    print(f"{asked} introspection requests for 150 made-up tokens in {elapsed:.2f} s")
    # The burst of 10 (carol took one), one regained a second.
    assert asked <= 10 + elapsed + 1
    assert statuses.count(401) == asked and statuses.count(429) == 150 - asked
    assert after == asked + 2  # dave once, the dead token once


# ------------------------------------------------------------------ the principal

async def test_tokens_without_a_principal_are_refused_and_share_nothing(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer, auth=f'audience = "{AUDIENCE}"\n')
            async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
                first = await auth.token(aud=AUDIENCE, client_id="app-one", scope="mcp")
                second = await auth.token(aud=AUDIENCE, azp="app-two")
                opened = await _post(client, hub, first)
                assert opened.status_code == 401
                assert "names no principal (claim 'sub')" in opened.json()["error_description"]
                assert "mcp-session-id" not in opened.headers
                # Whatever session the first one might have had, the second cannot use it.
                session = opened.headers.get("mcp-session-id", "none")
                reuse = await client.post(f"{hub.base}/mcp", headers={
                    **HEADERS, "Authorization": f"Bearer {second}", "Mcp-Session-Id": session},
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                assert reuse.status_code == 401


async def _session(client: httpx2.AsyncClient, hub: HttpHub, token: str) -> str:
    response = await _post(client, hub, token)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def test_a_configured_principal_claim_names_the_identity(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config = _config(tmp_path, auth.issuer,
                             auth=f'audience = "{AUDIENCE}"\nprincipal_claim = "client_id"\n')
            async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
                one = await auth.token(aud=AUDIENCE, client_id="app-one")
                two = await auth.token(aud=AUDIENCE, client_id="app-two")
                session = await _session(client, hub, one)
                await _session(client, hub, two)
                # app-two cannot use app-one's session.
                reuse = await client.post(f"{hub.base}/mcp", headers={
                    **HEADERS, "Authorization": f"Bearer {two}", "Mcp-Session-Id": session},
                    json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                assert reuse.status_code == 404
                nobody = await _post(client, hub, await auth.token(aud=AUDIENCE, sub="alice"))
                assert nobody.status_code == 401


_ = AuthServer  # the server object the helpers above drive
