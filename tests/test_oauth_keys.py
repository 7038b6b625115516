"""Upstream OAuth with keys instead of secrets, with real parts only.

A real authorization server (oauth2-mock-server from npm,
``tests/fixtures/oauth/key_auth_server.mjs``) that verifies client assertions
(``private_key_jwt``), workload JWTs (the JWT-bearer grant) and DPoP proofs, and
binds tokens to the proof key; an MCP server built with the Python SDK that checks
every token's signature and, with the DPoP check in front
(``tests/fixtures/oauth/dpop_gate.py``), every request's proof.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
import redis.asyncio as aioredis
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp.types import TextContent

from mcp_hub.config.model import load_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from mcp_hub.redact import redact
from mcp_hub.upstream.oauth.attach import token_store
from mcp_hub.upstream.oauth.dpop import DpopKey
from mcp_hub.upstream.oauth.machine import read_secret_file
from tests.oauth_key_parts import key_server, pems, workload_jwt
from tests.oauth_parts import hub_cli, protected_server, server_toml
from tests.system_services import redis_server

pytestmark = pytest.mark.anyio

CLIENT_ID = "hub-machine"


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return " ".join(c.text for c in content if isinstance(c, TextContent))


async def _whoami(hub: Hub) -> tuple[bool, str]:
    result = await hub.call_tool("p_whoami", {}, CallContext(tool_name="p_whoami"))
    return not result.is_error, _text(result)


def _upstream(hub: Hub) -> dict[str, Any]:
    found: dict[str, Any] = next(u for u in hub.status()["upstreams"] if u["name"] == "prot")
    return found


def _state_files(tmp: Path) -> list[bytes]:
    return [p.read_bytes() for p in (tmp / "state").rglob("*") if p.is_file()]


async def test_private_key_jwt_authenticates_client_credentials_with_a_key(
        tmp_path: Path) -> None:
    private, public = pems(ec.generate_private_key(ec.SECP256R1()))
    key_file = tmp_path / "client.pem"
    key_file.write_text(private)
    with key_server(token_seconds=600) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        auth.trust(client_key=public)
        config = server_toml(tmp_path, url, f'grant = "client_credentials"\n'
                                            f'client_id = "{CLIENT_ID}"\nissuer = "{auth.url}"\n'
                                            'client_auth = "private_key_jwt"\n'
                                            f'private_key_file = "{key_file}"\n')
        called = hub_cli(config, "call", "p_whoami")
        assert called.returncode == 0, called.stderr
        assert f"sub={CLIENT_ID}" in called.stdout  # the AS verified the assertion's iss/sub
        seen = auth.requests()
        assert [(r["grant"], r["client_auth"], r["error"]) for r in seen] == [
            ("client_credentials", "private_key_jwt", None)]
        # The token is cached (encrypted): a second call asks the AS for nothing.
        again = hub_cli(config, "call", "p_whoami")
        assert again.returncode == 0, again.stderr
        assert len(auth.requests()) == 1
        assert not any(b"PRIVATE KEY" in blob for blob in _state_files(tmp_path))

        # A key the AS does not know: one refused request, the error named, no retry.
        key_file.write_text(pems(ec.generate_private_key(ec.SECP256R1()))[0])
        hub_cli(config, "logout", "prot")
        refused = hub_cli(config, "call", "p_whoami")
        assert refused.returncode != 0
        assert "invalid_client" in refused.stdout + refused.stderr
        assert [r["error"] is not None for r in auth.requests()] == [False, True]
        assert "PRIVATE KEY" not in refused.stdout + refused.stderr


async def test_jwt_bearer_rereads_the_rotated_assertion_file(tmp_path: Path) -> None:
    workload = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assertion = tmp_path / "token"
    with key_server(token_seconds=2) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        auth.trust(workload_key=pems(workload)[1])
        first = workload_jwt(workload, auth.url, "workload-a")
        assertion.write_text(first + "\n")
        config = server_toml(tmp_path, url, f'grant = "jwt_bearer"\nclient_id = "{CLIENT_ID}"\n'
                                            f'assertion_file = "{assertion}"\n')
        async with Hub(load_config(config), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                ok, text = await _whoami(hub)
                assert ok and "sub=workload-a" in text, text
                # The platform rotates the file; the next token request (the 2-second token
                # expires) presents the new one.
                second = workload_jwt(workload, auth.url, "workload-b")
                assertion.write_text(second)
                while "sub=workload-b" not in text:
                    ok, text = await _whoami(hub)
                    assert ok, text
                    await anyio.sleep(0.2)  # the token's age is the subject here
            status = json.dumps(hub.status())
        seen = auth.requests()
        assert {r["grant"] for r in seen} == {"urn:ietf:params:oauth:grant-type:jwt-bearer"}
        assert [r["error"] for r in seen] == [None] * len(seen)
        assert seen[0]["sub"] == "workload-a" and seen[-1]["sub"] == "workload-b"
        for secret in (first, second):
            assert secret not in status
            assert not any(secret.encode() in blob for blob in _state_files(tmp_path))


async def test_a_refused_jwt_bearer_grant_is_named_once_and_not_retried(tmp_path: Path) -> None:
    workload = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assertion = tmp_path / "token"
    with key_server(token_seconds=600) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        auth.trust(workload_key=pems(workload)[1])
        auth.refuse("invalid_scope")
        assertion.write_text(workload_jwt(workload, auth.url, "workload-a"))
        config = server_toml(tmp_path, url, f'grant = "jwt_bearer"\n'
                                            f'assertion_file = "{assertion}"\n')
        async with Hub(load_config(config), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                while _upstream(hub)["state"] != "needs_login":
                    await anyio.sleep(0.05)
                assert "invalid_scope" in str(_upstream(hub)["last_error"])
                ok, text = await _whoami(hub)
                assert not ok and "invalid_scope" in text, text
                await anyio.sleep(2.5)  # longer than the login poll: still one request
        assert len(auth.requests()) == 1


async def test_dpop_binds_the_token_and_proves_every_request(tmp_path: Path) -> None:
    proofs = tmp_path / "dpop.log"
    with key_server(token_seconds=600) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt", "--dpop-log", str(proofs)) as url:
        config = server_toml(tmp_path, url, 'grant = "client_credentials"\n'
                                            f'client_id = "{CLIENT_ID}"\nissuer = "{auth.url}"\n'
                                            'client_secret = "machine-secret"\ndpop = true\n')
        async with Hub(load_config(config), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                for _ in range(3):
                    ok, text = await _whoami(hub)
                    assert ok, text
                assert hub.status()["oauth"]["clients"] == {"prot": "pre-registered + dpop"}
        server = load_config(config).servers["prot"]
        pem = await token_store("prot", server).get_dpop_key()
        assert pem is not None
        seen = auth.requests()
        assert [(r["grant"], r["jkt"]) for r in seen] == [
            ("client_credentials", DpopKey.from_pem(pem).thumbprint)]  # bound to the hub's key
        decisions = proofs.read_text().splitlines()
        assert decisions and all(d.startswith("ok ") for d in decisions), decisions
        assert len(decisions) >= 4  # initialize, notification, list, three calls: each proven
        assert len(set(decisions)) == len(decisions)  # a fresh jti each time
        assert not any(b"PRIVATE KEY" in blob for blob in _state_files(tmp_path))


@pytest.mark.parametrize(("oauth", "named"), [
    ('grant = "client_credentials"\nclient_id = "c"\nclient_auth = "private_key_jwt"\n',
     "needs private_key_file"),
    ('grant = "client_credentials"\nclient_auth = "private_key_jwt"\nprivate_key_file = "KEY"\n',
     "needs client_id"),
    ('grant = "client_credentials"\nclient_id = "c"\nclient_auth = "private_key_jwt"\n'
     'private_key_file = "/nonexistent/key.pem"\n', "private_key_file: no such file"),
    ('client_id = "c"\nclient_secret = "s"\nprivate_key_file = "KEY"\n',
     "private_key_file needs client_auth 'private_key_jwt'"),
    ('grant = "jwt_bearer"\n', "needs assertion_file"),
    ('assertion_file = "KEY"\n', "assertion_file needs grant 'jwt_bearer'"),
    ('grant = "client_credentials"\nclient_id = "c"\nclient_secret = "s"\n'
     'client_auth = "private_key_jwt"\nprivate_key_file = "KEY"\n', "remove client_secret"),
])
def test_check_names_what_a_key_grant_is_missing(tmp_path: Path, oauth: str, named: str) -> None:
    key = tmp_path / "key.pem"
    key.write_text(pems(ec.generate_private_key(ec.SECP256R1()))[0])
    config = server_toml(tmp_path, "http://127.0.0.1:9/mcp", oauth.replace("KEY", str(key)))
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert named in str(raised.value)
    checked = hub_cli(config, "check")
    assert checked.returncode != 0
    assert named in checked.stdout + checked.stderr


def test_dpop_tokens_keys_and_assertions_are_redacted(tmp_path: Path) -> None:
    opaque = "opaque-access-token-0123456789"
    assert opaque not in redact(f"sent Authorization: DPoP {opaque}")
    assertion = tmp_path / "token"
    assertion.write_text("not-a-jwt-but-a-platform-credential-4711\n")
    key = tmp_path / "key.pem"
    key.write_text(pems(ec.generate_private_key(ec.SECP256R1()))[0])
    read = [read_secret_file(str(assertion), "assertion_file"),
            read_secret_file(str(key), "private_key_file")]
    for text in read:
        body = [line for line in text.splitlines() if "PRIVATE KEY" not in line]
        said = redact(f"refused: {text}")
        assert not any(line in said for line in body), said


async def test_replicas_share_the_dpop_key_and_token_through_redis(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_HUB_SECRET_KEY", Fernet.generate_key().decode())
    proofs = tmp_path / "dpop.log"
    async with redis_server(tmp_path) as redis:
        with key_server(token_seconds=600) as auth, \
                protected_server(auth.url, tmp_path / "calls.txt", "--dpop-log",
                                 str(proofs)) as url:
            configs = []
            for name in ("a", "b"):
                folder = tmp_path / name
                folder.mkdir()
                configs.append(server_toml(folder, url, 'grant = "client_credentials"\n'
                                           f'client_id = "{CLIENT_ID}"\nissuer = "{auth.url}"\n'
                                           'client_secret = "machine-secret"\ndpop = true\n'))
                text = configs[-1].read_text().replace(
                    "[servers.prot]", f'[state]\nurl = "{redis.url}"\n\n[servers.prot]', 1)
                configs[-1].write_text(text)
            async with Hub(load_config(configs[0]), load_plugin_modules=False) as first:
                with anyio.fail_after(60):
                    await first.wait_ready(20)
                    assert (await _whoami(first))[0]
                    async with Hub(load_config(configs[1]), load_plugin_modules=False) as second:
                        await second.wait_ready(20)
                        for hub in (first, second, second, first):
                            ok, text = await _whoami(hub)
                            assert ok, text
            assert len(auth.requests()) == 1  # the second replica used the stored token
            decisions = proofs.read_text().splitlines()
            assert decisions and all(d.startswith("ok ") for d in decisions), decisions
            dump = await _redis_values(redis.url)
            assert dump and not any(b"PRIVATE KEY" in v or b"eyJ" in v for v in dump)
            for name in ("a", "b"):
                assert not list((tmp_path / name / "state").rglob("*.bin"))


async def _redis_values(url: str) -> list[bytes]:
    client = aioredis.from_url(url)
    try:
        return [v for k in [k async for k in client.scan_iter(match="*")]
                if (v := await client.get(k)) is not None]
    finally:
        await client.aclose()
