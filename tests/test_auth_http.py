"""Signing in to the HTTP hub with a real authorization server (oauth2-mock-server).

The hub runs as a real process on an ephemeral loopback port; tokens are minted
and signed by the real authorization server; clients are the SDK's
ClientSession over Streamable HTTP and SSE, and plain HTTP requests where the
status code and ``WWW-Authenticate`` header are the point.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent

from tests.auth_support import AuthServer, oauth_server
from tests.hubtest import HttpHub, echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

CI_TOKEN = "ci-token-0123456789abcdef"
CANARY = "canary-7f3a9c-do-not-log"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(tmp: Path, issuer: str, audit: Path, *, extra: str = "") -> Path:
    body = (echo_server_toml("echo") + echo_server_toml("other")
            + f'''
[auth]
issuer = "{issuer}"
required_scopes = ["mcp"]
introspection = true

[profiles.dev]
toolsets = ["mcp-echo"]

[profiles.ops]
toolsets = ["mcp-other"]

[[access]]
match = "sub:alice"
profile = "dev"

[[access]]
match = "token:ci"
profile = "ops"

[[access]]
match = "sub:carol"
admin = true

[audit]
path = "{audit}"
{extra}''')
    hub = f'[hub.http]\nauth_tokens = [{{ name = "ci", token = "{CI_TOKEN}" }}]\n'
    return write_config(tmp, body, hub=hub)


async def _post(hub: HttpHub, token: str | None, path: str = "/mcp") -> httpx2.Response:
    headers = dict(HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=30) as client:
        return await client.post(f"{hub.base}{path}", json=INIT, headers=headers)


def _challenge(response: httpx2.Response) -> dict[str, str]:
    value = response.headers.get("www-authenticate", "")
    assert value.startswith("Bearer "), value
    return dict(re.findall(r'(\w+)="([^"]*)"', value))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _forged(header: dict[str, Any], payload: dict[str, Any], key: bytes | None) -> str:
    head = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(payload).encode())
    sig = b"" if key is None else hmac.new(key, head.encode(), hashlib.sha256).digest()
    return head + "." + _b64(sig)


def _payload(token: str) -> dict[str, Any]:
    part = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))))


async def _alice(auth: AuthServer, hub: HttpHub, **claims: Any) -> str:
    base = {"sub": "alice", "aud": f"{hub.base}/mcp", "scope": "mcp", "client_id": "vscode"}
    return await auth.token(**{**base, **claims})


async def test_metadata_and_challenges(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with oauth_server() as auth, http_hub(_config(tmp_path, auth.issuer, tmp_path / "a.log"),
                                                   tmp_path) as hub:
            async with httpx2.AsyncClient(timeout=30) as client:
                root = (await client.get(f"{hub.base}/.well-known/oauth-protected-resource")).json()
                assert root["resource"] == f"{hub.base}/mcp"
                assert root["authorization_servers"] == [auth.issuer]
                assert root["scopes_supported"] == ["mcp"]
                for suffix in ("/mcp", "/mcp/", "/p/dev/mcp", "/p/dev/mcp/", "/sse", "/p/ops/sse"):
                    doc = (await client.get(f"{hub.base}/.well-known/oauth-protected-resource{suffix}")).json()
                    # The resource is the endpoint as spelled in the metadata URL, trailing slash included.
                    assert doc["resource"] == f"{hub.base}{suffix}"
                missing = await client.get(f"{hub.base}/.well-known/oauth-protected-resource/p/nope/mcp")
                assert missing.status_code == 404

            bare = await _post(hub, None)
            assert bare.status_code == 401
            assert _challenge(bare)["resource_metadata"] == f"{hub.base}/.well-known/oauth-protected-resource/mcp"
            on_profile = await _post(hub, None, "/p/dev/mcp")
            assert _challenge(on_profile)["resource_metadata"].endswith("/oauth-protected-resource/p/dev/mcp")

            assert (await _post(hub, await _alice(auth, hub))).status_code == 200
            valid = await _alice(auth, hub)
            jwks = (await auth.http.get(f"{auth.issuer}/jwks")).content
            refused = {
                "expired": await _alice(auth, hub, expires_in=-600),
                "wrong audience": await _alice(auth, hub, aud="vscode"),
                "another resource": await _alice(auth, hub, aud="https://api.example.com/mcp"),
                "another endpoint's resource": await _alice(auth, hub, aud=f"{hub.base}/p/ops/mcp"),
                "wrong issuer": await _alice(auth, hub, iss="https://evil.example.com"),
                "bad signature": valid[:-8] + ("AAAAAAAA" if not valid.endswith("AAAAAAAA") else "BBBBBBBB"),
                "alg none": _forged({"alg": "none", "kid": "k1"}, _payload(valid), None),
                "HS256 with the public key": _forged({"alg": "HS256", "kid": "k1"}, _payload(valid), jwks),
                "not a token": "x" * 40,
            }
            for what, token in refused.items():
                response = await _post(hub, token, "/p/dev/mcp" if "endpoint" in what else "/mcp")
                assert response.status_code == 401, what
                challenge = _challenge(response)
                assert challenge["error"] == "invalid_token", what
                assert "resource_metadata" in challenge, what

            no_scope = await _post(hub, await _alice(auth, hub, scope="profile"))
            assert no_scope.status_code == 403
            assert _challenge(no_scope)["error"] == "insufficient_scope"
            assert _challenge(no_scope)["scope"] == "mcp"

            # An identity that no [[access]] rule admits is refused.
            stranger = await _alice(auth, hub, sub="mallory")
            assert (await _post(hub, stranger)).status_code == 403

            # Key rotation at the authorization server: a token signed by the new key is accepted.
            await auth.rotate("k2")
            rotated = await _alice(auth, hub)
            assert json.loads(base64.urlsafe_b64decode(rotated.split(".")[0] + "==")).get("kid") == "k2"
            assert (await _post(hub, rotated)).status_code == 200

            # Opaque tokens through RFC 7662 introspection.
            await auth.opaque("opaque-carol-token", {"active": True, "sub": "carol", "scope": "mcp",
                                                     "aud": f"{hub.base}/mcp", "iss": auth.issuer})
            assert (await _post(hub, "opaque-carol-token")).status_code == 200
            assert (await _post(hub, "opaque-unknown-token")).status_code == 401


async def _names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def _denied(session: ClientSession, name: str) -> str:
    with pytest.raises(MCPError) as caught:
        await session.call_tool(name, {"text": CANARY})
    return str(caught.value)


async def test_two_identities_see_and_reach_different_tools(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with anyio.fail_after(180):
        async with oauth_server() as auth, http_hub(_config(tmp_path, auth.issuer, audit), tmp_path) as hub:
            alice = {"Authorization": f"Bearer {await _alice(auth, hub)}"}
            ci = {"Authorization": f"Bearer {CI_TOKEN}"}
            async with http_session(hub.mcp_url, headers=alice) as session:
                names = await _names(session)
                assert "echo_echo" in names and not any(n.startswith("other_") for n in names)
                result = await session.call_tool("echo_echo", {"text": CANARY})
                assert isinstance(result.content[0], TextContent) and result.content[0].text == CANARY
                message = await _denied(session, "other_echo")
                assert "Unknown tool" in message and "other" not in message.replace("other_echo", "")
            async with http_session(hub.mcp_url, headers=ci) as session:
                names = await _names(session)
                assert "other_echo" in names and not any(n.startswith("echo_") for n in names)
                assert "Unknown tool" in await _denied(session, "echo_echo")
                assert not (await session.call_tool("other_echo", {"text": "hi"})).is_error
            async with (sse_client(f"{hub.base}/sse", headers=alice) as (read, write),
                        ClientSession(read, write) as session):
                await session.initialize()
                assert "echo_echo" in await _names(session)
                assert "other_echo" not in await _names(session)
                assert "Unknown tool" in await _denied(session, "other_echo")
            async with (sse_client(f"{hub.base}/sse", headers=ci) as (read, write),
                        ClientSession(read, write) as session):
                await session.initialize()
                assert "other_echo" in await _names(session)
                assert "Unknown tool" in await _denied(session, "echo_echo")

            carol = {"Authorization": f"Bearer {await _alice(auth, hub, sub='carol')}"}
            async with httpx2.AsyncClient(timeout=30) as client:
                views = {who: ((await client.get(f"{hub.base}/status.json", headers=h)).text,
                               (await client.get(f"{hub.base}/metrics", headers=h)).text)
                         for who, h in (("ci", ci), ("alice", alice), ("carol", carol))}
                assert (await client.get(f"{hub.base}/status.json")).status_code == 401
            # Each narrow identity sees its own server, tools and counters, nothing of the other's.
            status, metrics = views["ci"]
            assert 'mcp_hub_identity_calls_total{identity="token:ci",status="ok"} 1' in metrics
            assert json.loads(status)["identities"] == {"token:ci": {"ok": 1, "unknown": 2}}
            for seen in views["ci"]:
                assert "alice" not in seen and "echo_echo" not in seen and 'server="echo"' not in seen
            status, metrics = views["alice"]
            assert 'mcp_hub_identity_calls_total{identity="alice",status="ok"} 1' in metrics
            assert [u["name"] for u in json.loads(status)["upstreams"]] == ["echo"]
            for seen in views["alice"]:
                assert "token:ci" not in seen and "other_echo" not in seen and 'server="other"' not in seen
            # The admin rule (sub:carol, admin = true) sees every identity.
            status, metrics = views["carol"]
            assert 'mcp_hub_identity_calls_total{identity="alice",status="ok"} 1' in metrics
            assert 'mcp_hub_identity_calls_total{identity="token:ci",status="ok"} 1' in metrics
            assert json.loads(status)["identities"]["alice"]["ok"] == 1

        lines = [json.loads(line) for line in audit.read_text().splitlines()]
    calls = [line for line in lines if line["event"] == "call"]
    by_who = {(c["identity"], c["tool"], c["outcome"]) for c in calls}
    assert ("alice", "echo_echo", "ok") in by_who
    assert ("alice", "other_echo", "denied") in by_who
    assert ("token:ci", "echo_echo", "denied") in by_who
    assert ("token:ci", "other_echo", "ok") in by_who
    ok = next(c for c in calls if c["identity"] == "alice" and c["outcome"] == "ok")
    assert ok["client_id"] == "vscode" and ok["server"] == "echo" and ok["arguments_bytes"] > 0
    assert ok["result_bytes"] > 0 and ok["session"]
    assert CANARY not in audit.read_text()


async def test_the_bridge_sees_only_what_the_identity_reaches(tmp_path: Path) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9", tmp_path / "audit.jsonl",
                     extra='\n[tool_search]\nmode = "on"\n')
    with anyio.fail_after(120):
        async with oauth_server() as auth:
            config.write_text(config.read_text().replace("http://127.0.0.1:9", auth.issuer))
            async with http_hub(config, tmp_path) as hub:
                alice = {"Authorization": f"Bearer {await _alice(auth, hub)}"}
                async with http_session(hub.mcp_url, headers=alice) as session:
                    assert {"tool_search", "tool_describe", "tool_call"} <= await _names(session)
                    found = await session.call_tool("tool_search", {"query": "echo text back"})
                    text = found.content[0].text if isinstance(found.content[0], TextContent) else ""
                    assert "echo_echo" in text and "other_" not in text
                    described = await session.call_tool("tool_describe", {"name": "other_echo"})
                    block = described.content[0]
                    assert isinstance(block, TextContent)
                    answer = json.loads(block.text)
                    # Hidden reads as absent, and the suggestions come only from what alice sees.
                    assert answer["tools"] == [] and answer["not_found"][0]["close"] == ["echo_echo"]
                    with pytest.raises(MCPError) as caught:
                        await session.call_tool("tool_call", {"name": "other_echo", "arguments": {"text": CANARY}})
                    assert "Unknown tool" in str(caught.value) and "Did you mean: echo_echo" in str(caught.value)
                    ok = await session.call_tool("tool_call", {"name": "echo_echo", "arguments": {"text": "hi"}})
                    assert not ok.is_error
                async with http_session(hub.mcp_url, headers={"Authorization": f"Bearer {CI_TOKEN}"}) as session:
                    found = await session.call_tool("tool_search", {"query": "echo text back"})
                    text = found.content[0].text if isinstance(found.content[0], TextContent) else ""
                    assert "other_echo" in text and "echo_echo" not in text


async def test_the_sdk_client_signs_in_by_itself(tmp_path: Path) -> None:
    """The SDK's OAuthClientProvider: 401 → RFC 9728 metadata → OIDC discovery → dynamic
    registration → authorization code with PKCE (the browser step driven headless) → token
    for the hub's resource → list and call."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
    from pydantic import AnyUrl

    class Memory:
        tokens: OAuthToken | None = None
        client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    redirected: dict[str, str] = {}

    async def browser(url: str) -> None:
        # The user's browser: the mock server signs the user in and redirects with a code.
        async with httpx2.AsyncClient(timeout=10) as plain:
            response = await plain.get(url, follow_redirects=False)
        assert response.status_code in (301, 302, 303, 307), response.text
        query = httpx2.URL(response.headers["location"]).params
        redirected.update(code=query["code"], state=query.get("state", ""))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected["state"] or None)

    storage = Memory()
    with anyio.fail_after(120):
        async with oauth_server() as auth, http_hub(_config(tmp_path, auth.issuer, tmp_path / "a.log"),
                                                   tmp_path) as hub:
            await auth.login("alice", scope="mcp")
            provider = OAuthClientProvider(
                server_url=hub.mcp_url,
                client_metadata=OAuthClientMetadata(
                    redirect_uris=[AnyUrl("http://127.0.0.1:1/callback")], client_name="sdk-test",
                    grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                    token_endpoint_auth_method="none"),
                storage=storage, redirect_handler=browser, callback_handler=callback)
            async with (
                httpx2.AsyncClient(auth=provider, timeout=30) as http,
                streamable_http_client(hub.mcp_url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = await _names(session)
                assert "echo_echo" in names and "other_echo" not in names
                result = await session.call_tool("echo_echo", {"text": "signed in"})
                assert isinstance(result.content[0], TextContent) and result.content[0].text == "signed in"
    assert storage.client is not None and storage.tokens is not None
    claims = _payload(storage.tokens.access_token)
    assert claims["sub"] == "alice" and claims["aud"] == f"{hub.base}/mcp"
    assert "code" in redirected


async def test_list_changed_reaches_identities_whose_tools_changed(tmp_path: Path) -> None:
    """Through real sessions: each identity hears of changes to what it sees, and its list
    follows. (That the others are *not* told is exact in test_auth_units; here, notifications
    on separate streams cannot be ordered against each other.)"""
    from mcp import types

    heard: dict[str, list[anyio.Event]] = {"alice": [anyio.Event()], "ci": [anyio.Event()]}

    def handler(who: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                heard[who][-1].set()
                heard[who].append(anyio.Event())
        return on_message

    with anyio.fail_after(120):
        async with oauth_server() as auth, http_hub(_config(tmp_path, auth.issuer, tmp_path / "a.log"),
                                                   tmp_path) as hub:
            alice_headers = {"Authorization": f"Bearer {await _alice(auth, hub)}"}
            async with (
                http_session(hub.mcp_url, headers=alice_headers, message_handler=handler("alice")) as alice,
                http_session(hub.mcp_url, headers={"Authorization": f"Bearer {CI_TOKEN}"},
                             message_handler=handler("ci")) as ci,
            ):
                await _names(alice)
                await _names(ci)
                # A tool appears on the server only ci reaches: ci hears of it, alice does not.
                await ci.call_tool("other_add_tool", {"name": "extra"})
                await heard["ci"][0].wait()
                assert "other_extra" in await _names(ci)
                # Then one on alice's server: the first notification alice hears is this one.
                await alice.call_tool("echo_add_tool", {"name": "mine"})
                await heard["alice"][0].wait()
                assert len(heard["alice"]) == 2
                names = await _names(alice)
                assert "echo_mine" in names and "other_extra" not in names
