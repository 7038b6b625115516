"""The hub's own Client ID Metadata Document: served by a real HTTP hub at
``<public_url>/client-metadata.json`` and used as the client_id, after a
pre-registered client and before dynamic registration.

Two logins use it: one at the real authorization server (oauth2-mock-server)
in its CIMD mode, which fetches the document from the running hub and checks it
before it lets the login through (only the name lookup of the public host is
replaced), and the conformance suite's CIMD scenario."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_hub.config.model import load_config
from mcp_hub.upstream.oauth.attach import oauth_status
from tests.conformance import client_run, run
from tests.hubtest import http_hub
from tests.oauth_parts import auth_server, hub_cli, login, protected_server

PUBLIC = "https://hub.example.test/base"


def _toml(tmp: Path, http: str, oauth: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 1\n\n'
                    f"[hub.http]\n{http}\n\n"
                    '[servers.remote]\nurl = "http://127.0.0.1:9/mcp"\nauth = "oauth"\n'
                    f"connect_timeout = 1\n\n[servers.remote.oauth]\n{oauth}\n")
    return path


def test_client_identity_preference(tmp_path: Path) -> None:
    # An https public URL: the hub's own document is the client_id.
    oauth = load_config(_toml(tmp_path, f'public_url = "{PUBLIC}"')).servers["remote"].oauth
    assert oauth.client_metadata_url == f"{PUBLIC}/client-metadata.json"
    assert oauth.client_identity == "cimd (hub-served)"
    shown = oauth_status(load_config(_toml(tmp_path, f'public_url = "{PUBLIC}"')).servers)
    assert shown["clients"] == {"remote": "cimd (hub-served)"}
    assert shown["token_store"]["backend"] == "embedded"
    assert shown["token_store"]["where"] == f"files under {tmp_path / 'state' / 'oauth'}"
    # A pre-registered client comes first.
    oauth = load_config(_toml(tmp_path, f'public_url = "{PUBLIC}"',
                              'client_id = "pre"')).servers["remote"].oauth
    assert oauth.client_metadata_url is None and oauth.client_identity == "pre-registered"
    # An explicit document URL is kept.
    oauth = load_config(_toml(tmp_path, f'public_url = "{PUBLIC}"',
                              'client_metadata_url = "https://x.test/c.json"')
                        ).servers["remote"].oauth
    assert oauth.client_metadata_url == "https://x.test/c.json" and oauth.client_identity == "cimd"
    # No https public URL (a client_id URL must be https): dynamic registration.
    oauth = load_config(_toml(tmp_path, 'public_url = "http://hub.test"')).servers["remote"].oauth
    assert oauth.client_metadata_url is None and oauth.client_identity == "dynamic"


@pytest.mark.anyio
async def test_the_document_is_served_publicly_with_its_own_url_as_client_id(
        tmp_path: Path) -> None:
    config = _toml(tmp_path, f'public_url = "{PUBLIC}"\nauth_tokens = ["s3cret-hub-token"]',
                   "callback_port = 8123")
    async with http_hub(config, tmp_path, probe="/healthz") as hub, httpx2.AsyncClient() as client:
        # No token, and a Host the hub does not serve under: the document is public.
        r = await client.get(f"{hub.base}/client-metadata.json",
                             headers={"Host": "hub.example.test"})
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        doc = r.json()
        assert (await client.get(f"{hub.base}/mcp")).status_code == 401  # the rest is not
    assert doc["client_id"] == f"{PUBLIC}/client-metadata.json"
    assert doc["redirect_uris"] == ["http://127.0.0.1/callback", "http://127.0.0.1:8123/callback"]
    assert doc["grant_types"] == ["authorization_code", "refresh_token"]
    assert doc["response_types"] == ["code"]
    assert doc["token_endpoint_auth_method"] == "none"
    assert doc["client_name"] == "mcp-hub" and doc["client_uri"] == PUBLIC


@pytest.mark.anyio
async def test_no_document_without_an_https_public_url(tmp_path: Path) -> None:
    async with http_hub(_toml(tmp_path, ""), tmp_path, probe="/healthz") as hub, httpx2.AsyncClient() as client:
        r = await client.get(f"{hub.base}/client-metadata.json")
    assert r.status_code == 404


@pytest.mark.node
def test_a_login_where_cimd_is_supported_uses_the_hubs_document() -> None:
    """The suite's auth/basic-cimd server advertises CIMD and warns unless the client_id is
    https://conformance-test.local/client-metadata.json; the driver sets only the hub's
    public URL (https://conformance-test.local), no client_metadata_url."""
    if not run.suite_available():
        if os.environ.get("CI") == "true":
            pytest.fail("the conformance suite is not installed (make setup)")
        pytest.skip("the conformance suite is not installed (make setup)")
    result = client_run.run_scenario("auth/basic-cimd")
    assert result.status == "pass" and result.warnings == 0, result.reason
    assert result.passed >= 5


@pytest.mark.anyio
async def test_a_login_at_a_server_that_fetches_the_document(tmp_path: Path) -> None:
    public = "https://hub.example.test"
    with auth_server(token_seconds=60, cimd=True) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        config = tmp_path / "servers.toml"
        config.write_text(f'[hub]\nstate_dir = "{tmp_path / "state"}"\nstartup_timeout = 20\n\n'
                          f'[hub.http]\npublic_url = "{public}"\n\n'
                          f'[servers.prot]\nurl = "{url}"\nauth = "oauth"\nprefix = "p"\n')
        async with http_hub(config, tmp_path, probe="/healthz") as hub:
            # The authorization server reaches https://hub.example.test at the hub's port.
            httpx2.post(f"{auth.url}/test/cimd-origin", json={"origin": hub.base},
                        timeout=5).raise_for_status()
            await anyio.to_thread.run_sync(login, config)
            called = await anyio.to_thread.run_sync(hub_cli, config, "call", "p_whoami")
        stats = auth.stats()
    assert called.returncode == 0 and "sub=" in called.stdout, called.stderr
    assert stats["registrations"] == 0  # no dynamic registration: the document is the client
    [fetched] = stats["cimd_fetches"]
    assert fetched["client_id"] == f"{public}/client-metadata.json"
    assert fetched["status"] == 200
    assert fetched["document"]["client_id"] == f"{public}/client-metadata.json"
    assert stats["token"] == {"authorization_code": 1}
