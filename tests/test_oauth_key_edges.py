"""The edges of key-based upstream OAuth, with real parts only.

- ``mcp-hub check`` and the hub's start-up name a key, certificate, assertion or
  subject-token file that is missing, empty or unusable, with the server and the
  key, and never quote the file;
- ``certificate_file``: the client assertion's header carries the certificate's
  ``x5t#S256`` and ``x5t`` (Microsoft Entra ID's certificate credentials), seen by
  a real authorization server (``tests/fixtures/oauth/key_auth_server.mjs``);
- two replicas making the DPoP key at the same moment store one and both use it
  (the embedded store and a real redis-server);
- a ``jwt_bearer`` server parked by a refused grant tries again once per rotation
  of its ``assertion_file``.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID
from mcp.types import TextContent

from mcp_hub.config.model import load_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.oauth.dpop import DpopKey, DpopSigner
from mcp_hub.upstream.oauth.kvstore import StateStore
from mcp_hub.upstream.oauth.tokens import TokenStore, open_store
from tests.oauth_key_parts import key_server, pems, workload_jwt
from tests.oauth_parts import hub_cli, protected_server, server_toml
from tests.system_services import redis_server

pytestmark = pytest.mark.anyio

CLIENT_ID = "hub-machine"
#: What an unusable file holds; no message may quote it.
SECRET_TEXT = "platform-credential-do-not-print-4711"


def _certificate(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> x509.Certificate:
    """A self-signed certificate of ``key``, as one registers with Entra ID."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-hub test client")])
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))


def _cert_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return _certificate(key).public_bytes(serialization.Encoding.PEM).decode()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _key_config(tmp: Path, oauth: str) -> Path:
    """A ``private_key_jwt`` client whose files are named in ``oauth`` (KEY, CERT)."""
    ec_key = ec.generate_private_key(ec.SECP256R1())
    (tmp / "key.pem").write_text(pems(ec_key)[0])
    (tmp / "cert.pem").write_text(_cert_pem(ec_key))
    (tmp / "other-cert.pem").write_text(_cert_pem(ec.generate_private_key(ec.SECP256R1())))
    (tmp / "garbage").write_text(f"-----BEGIN PRIVATE KEY-----\n{SECRET_TEXT}\n"
                                 "-----END PRIVATE KEY-----\n")
    (tmp / "empty").write_text("\n")
    text = oauth.replace("KEY", str(tmp / "key.pem")).replace("CERT", str(tmp / "cert.pem"))
    return server_toml(tmp, "http://127.0.0.1:9/mcp", text.replace("DIR", str(tmp)))


PKJ = f'grant = "client_credentials"\nclient_id = "{CLIENT_ID}"\nclient_auth = "private_key_jwt"\n'


@pytest.mark.parametrize(("oauth", "named"), [
    ('grant = "token_exchange"\nclient_id = "c"\ntoken_endpoint = "http://127.0.0.1:9/t"\n'
     'subject_token_file = "DIR/no-such-token"\n', "subject_token_file: no such file"),
    ('grant = "token_exchange"\nclient_id = "c"\ntoken_endpoint = "http://127.0.0.1:9/t"\n'
     'subject_token_file = "DIR/empty"\n', "subject_token_file: DIR/empty is empty"),
    ('grant = "jwt_bearer"\nassertion_file = "DIR/empty"\n', "assertion_file: DIR/empty is empty"),
    (PKJ + 'private_key_file = "DIR/garbage"\n',
     "private_key_file: DIR/garbage is not an unencrypted PEM private key"),
    (PKJ + 'private_key_file = "KEY"\nsigning_algorithm = "RS256"\n',
     "private_key_file: an EC secp256r1 key cannot sign signing_algorithm 'RS256'"),
    (PKJ + 'private_key_file = "KEY"\ncertificate_file = "DIR/other-cert.pem"\n',
     "certificate_file: DIR/other-cert.pem does not certify the key in private_key_file"),
    (PKJ + 'private_key_file = "KEY"\ncertificate_file = "DIR/garbage"\n',
     "certificate_file: DIR/garbage is not a PEM certificate"),
    (PKJ + 'private_key_file = "KEY"\ncertificate_file = "DIR/no-such-cert"\n',
     "certificate_file: no such file"),
    ('client_id = "c"\nclient_secret = "s"\ncertificate_file = "CERT"\n',
     "certificate_file needs client_auth 'private_key_jwt'"),
    ('grant = "jwt_bearer"\nassertion_file = "KEY"\ncertificate_file = "CERT"\n',
     "grant 'jwt_bearer' sends the workload's JWT as it is (the hub signs nothing): "
     "remove certificate_file"),
])
def test_check_and_start_up_name_an_unusable_key_grant_file(
        tmp_path: Path, oauth: str, named: str) -> None:
    config = _key_config(tmp_path, oauth)
    named = named.replace("DIR", str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        load_config(config)  # what `mcp-hub serve` does first
    assert named in str(raised.value) and "servers.prot.oauth" in str(raised.value)
    checked = hub_cli(config, "check")
    said = checked.stdout + checked.stderr
    assert checked.returncode != 0
    assert named in said and "servers.prot.oauth" in said, said
    assert SECRET_TEXT not in said


def test_a_matching_certificate_passes_check(tmp_path: Path) -> None:
    config = _key_config(tmp_path, PKJ + 'private_key_file = "KEY"\ncertificate_file = "CERT"\n')
    settings = load_config(config).servers["prot"].oauth
    assert settings.certificate_file == str(tmp_path / "cert.pem")


async def test_a_certificate_puts_its_thumbprints_in_the_assertion_header(
        tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = pems(key)
    (tmp_path / "client.pem").write_text(private)
    cert = _certificate(key)
    (tmp_path / "client.crt").write_text(cert.public_bytes(serialization.Encoding.PEM).decode())
    der = cert.public_bytes(serialization.Encoding.DER)
    with key_server(token_seconds=600) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        auth.trust(client_key=public)
        config = server_toml(tmp_path, url, PKJ + f'issuer = "{auth.url}"\n'
                             f'private_key_file = "{tmp_path / "client.pem"}"\n'
                             f'certificate_file = "{tmp_path / "client.crt"}"\n')
        called = hub_cli(config, "call", "p_whoami")
        assert called.returncode == 0, called.stderr
        assert f"sub={CLIENT_ID}" in called.stdout
        seen = auth.requests()
    assert [(r["client_auth"], r["error"]) for r in seen] == [("private_key_jwt", None)]
    assert seen[0]["x5t_s256"] == _b64(hashlib.sha256(der).digest())
    assert seen[0]["x5t"] == _b64(hashlib.sha1(der, usedforsecurity=False).digest())


class _HeldAfterEmptyRead:
    """A token-record backend that, once it has found no DPoP key, holds the reader
    until ``release`` is set: the other replica makes and stores its key meanwhile."""

    def __init__(self, inner: StateStore) -> None:
        self.inner = inner
        self.found_none = anyio.Event()
        self.release = anyio.Event()

    async def get(self, key: str) -> bytes | None:
        value = await self.inner.get(key)
        if value is None and key.endswith("/dpop") and not self.found_none.is_set():
            self.found_none.set()
            await self.release.wait()
        return value

    async def put(self, key: str, value: bytes) -> None:
        await self.inner.put(key, value)

    async def put_if_absent(self, key: str, value: bytes) -> bool:
        return await self.inner.put_if_absent(key, value)

    async def delete(self, key: str) -> bool:
        return await self.inner.delete(key)


@pytest.mark.parametrize("shared", [False, True], ids=["embedded", "redis"])
async def test_replicas_making_the_dpop_key_at_once_both_use_the_stored_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared: bool) -> None:
    monkeypatch.setenv("MCP_HUB_SECRET_KEY", Fernet.generate_key().decode())
    url = "http://127.0.0.1:9/mcp"
    async with AsyncExitStack() as stack:
        state_url = None
        if shared:
            state_url = (await stack.enter_async_context(redis_server(tmp_path))).url
        (first_backend, first_box), (second_backend, second_box) = (
            open_store(tmp_path / "state", state_url) for _ in range(2))
        held = _HeldAfterEmptyRead(second_backend)
        first = DpopSigner(TokenStore(first_backend, first_box, "prot", url))
        second = DpopSigner(TokenStore(held, second_box, "prot", url))
        keys: dict[str, DpopKey] = {}

        async def second_key() -> None:
            keys["second"] = await second.key()

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(second_key)
                await held.found_none.wait()  # both replicas have seen no key
                keys["first"] = await first.key()
                held.release.set()
            stored = await TokenStore(first_backend, first_box, "prot", url).get_dpop_key()
    assert stored is not None
    thumbprint = DpopKey.from_pem(stored).thumbprint
    assert keys["first"].thumbprint == keys["second"].thumbprint == thumbprint


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return " ".join(c.text for c in content if isinstance(c, TextContent))


def _upstream(hub: Hub) -> dict[str, Any]:
    found: dict[str, Any] = next(u for u in hub.status()["upstreams"] if u["name"] == "prot")
    return found


def _rotate(path: Path, text: str) -> None:
    """Replace the file as platforms do: a new file renamed over the old one."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text)
    os.replace(fresh, path)


async def _parked_after(hub: Hub, auth: Any, requests: int) -> None:
    """Wait until the AS has seen ``requests`` token requests and the server is parked."""
    while len(auth.requests()) < requests or _upstream(hub)["state"] != "needs_login":
        await anyio.sleep(0.05)


async def test_a_rotated_assertion_file_wakes_a_refused_jwt_bearer_grant_once(
        tmp_path: Path) -> None:
    workload = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assertion = tmp_path / "token"
    with key_server(token_seconds=600) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        auth.trust(workload_key=pems(workload)[1])
        assertion.write_text(workload_jwt(stranger, auth.url, "expired-a"))
        config = server_toml(tmp_path, url, f'grant = "jwt_bearer"\n'
                                            f'assertion_file = "{assertion}"\n')
        async with Hub(load_config(config), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                await _parked_after(hub, auth, 1)
                assert "invalid_grant" in str(_upstream(hub)["last_error"])
                # Another unusable assertion: one more request, parked again.
                _rotate(assertion, workload_jwt(stranger, auth.url, "expired-b"))
                await _parked_after(hub, auth, 2)
                # The platform's good one: the next request succeeds.
                _rotate(assertion, workload_jwt(workload, auth.url, "workload-c"))
                while _upstream(hub)["state"] != "ready":
                    await anyio.sleep(0.05)
                result = await hub.call_tool("p_whoami", {}, CallContext(tool_name="p_whoami"))
                assert not result.is_error and "sub=workload-c" in _text(result), _text(result)
        seen = auth.requests()
    assert [r["error"] is None for r in seen] == [False, False, True]  # one per change
