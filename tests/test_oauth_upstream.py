"""The hub as an OAuth client of a protected upstream, with real parts only.

A real authorization server (oauth2-mock-server from npm, with dynamic
registration and revocable refresh tokens added through its hooks) and an MCP
server built with the Python SDK's ``AuthSettings``/``TokenVerifier`` that checks
every token's signature, issuer and expiry. ``mcp-hub login --no-browser`` is run
as a person would, its one printed URL followed headlessly; a hub then lists and
calls the upstream's tools.
"""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import anyio
import pytest
from cryptography.fernet import Fernet
from mcp.types import TextContent

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream.oauth.attach import token_store
from tests.oauth_parts import auth_server, hub_cli, login, protected_server, server_toml

pytestmark = pytest.mark.anyio


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return " ".join(c.text for c in content if isinstance(c, TextContent))


async def _call(hub: Hub) -> tuple[bool, str]:
    result = await hub.call_tool("p_whoami", {}, CallContext(tool_name="p_whoami"))
    return not result.is_error, _text(result)


def _state(hub: Hub) -> str:
    return next(u["state"] for u in hub.status()["upstreams"] if u["name"] == "prot")


async def test_login_refresh_revoke_and_login_again(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    with auth_server(token_seconds=3) as auth, protected_server(auth.url, calls) as url:
        config_path = server_toml(tmp_path, url)
        # Before any login: needs_login, named by `mcp-hub check`, without a token request.
        checked = hub_cli(config_path, "check")
        assert checked.returncode == 1
        assert "needs_login" in checked.stdout and "mcp-hub login prot" in checked.stdout
        assert auth.token_requests() == 0

        login(config_path)
        stats = auth.stats()
        assert stats["registrations"] == 1  # dynamic client registration
        assert stats["token"] == {"authorization_code": 1}
        assert all(r == url for r in stats["token_resource"])  # RFC 8707 resource sent
        assert all(r == url for r in stats["authorize_resource"])

        async with Hub(load_config(config_path), load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                assert "p_whoami" in hub.registry.snapshot()
                # Calls keep working across several refreshes of a 3-second token.
                ok_calls = 0
                while auth.stats()["token"].get("refresh_token", 0) < 3:
                    ok, text = await _call(hub)
                    assert ok, text
                    assert text.startswith("sub=")
                    ok_calls += 1
                    await anyio.sleep(0.5)  # let the token age; the clock is the subject here
                assert _state(hub) == "ready"

                # Revoke every refresh token: the next refresh fails -> needs_login.
                auth.revoke_refresh_tokens()
                while _state(hub) != "needs_login":
                    await _call(hub)
                    await anyio.sleep(0.2)
                after = auth.token_requests()
                for _ in range(5):
                    ok, text = await _call(hub)
                    assert not ok
                    assert "needs_login" in text or "mcp-hub login prot" in text, text
                await anyio.sleep(2.5)  # longer than the login poll: still no token traffic
                assert auth.token_requests() == after, "no retry storm after a refused refresh"
                status = json.dumps(hub.status())
                assert "mcp-hub login prot" in status

                # A new login reaches the running hub without a restart.
                await anyio.to_thread.run_sync(login, config_path)
                while _state(hub) != "ready":
                    await anyio.sleep(0.1)
                ok, text = await _call(hub)
                assert ok, text
    assert ok_calls >= 3


async def test_pre_registered_client_without_resource_param(tmp_path: Path) -> None:
    with auth_server(token_seconds=60) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        config_path = server_toml(tmp_path, url, 'client_id = "hub-preregistered"\n'
                                                 "resource_param = false\n")
        login(config_path)
        stats = auth.stats()
        assert stats["registrations"] == 0
        assert stats["token_resource"] == [None]
        assert stats["authorize_resource"] == [None]
        called = hub_cli(config_path, "call", "p_whoami")
        assert called.returncode == 0, called.stderr
        assert "sub=" in called.stdout


async def test_token_store_is_encrypted_and_logout_forgets(tmp_path: Path) -> None:
    with auth_server(token_seconds=60) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        config_path = server_toml(tmp_path, url)
        login(config_path)
        folder = tmp_path / "state" / "oauth"
        key = folder / "secret.key"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        blobs = [p.read_bytes() for p in folder.glob("*.bin")]
        assert len(blobs) >= 2  # the tokens and the registered client
        tokens = await token_store("prot", load_config(config_path).servers["prot"]).get_tokens()
        assert tokens is not None and tokens.refresh_token
        secrets = [tokens.access_token.encode(), tokens.refresh_token.encode()]
        box = Fernet(key.read_bytes().strip())
        plain = [box.decrypt(blob) for blob in blobs]  # each blob is a sealed record
        assert any(secrets[0] in text for text in plain)
        assert any(b"dcr-" in text for text in plain)  # the registered client's record
        for blob, text in zip(blobs, plain, strict=True):
            # A Fernet token is random base64, so match whole values, not short marks
            # that may turn up in it by chance.
            values = [v.encode() for v in json.loads(text).values()
                      if isinstance(v, str) and len(v) >= 12]
            assert not any(value in blob for value in [*secrets, *values])
            assert b"access_token" not in blob and b"refresh_token" not in blob
        out = hub_cli(config_path, "logout", "prot")
        assert out.returncode == 0 and "deleted" in out.stderr
        checked = hub_cli(config_path, "check")
        assert "needs_login" in checked.stdout


async def _until_needs_login(hub: Hub) -> float:
    """Seconds until the server shows ``needs_login`` (polled every 50 ms; the caller's
    bound ends the wait); it may pass through ``reconnecting`` on the way."""
    started = anyio.current_time()
    while _state(hub) != "needs_login":
        await anyio.sleep(0.05)  # polling the status, the subject of the test
    return anyio.current_time() - started


async def test_logout_in_another_process_ends_the_running_hubs_session(tmp_path: Path) -> None:
    """``mcp-hub logout`` while a hub serves the server on the tokens it holds in memory:
    within seconds the hub shows ``needs_login`` and no call reaches the upstream."""
    calls = tmp_path / "calls.txt"
    with auth_server(token_seconds=600) as auth, protected_server(auth.url, calls) as url:
        config_path = server_toml(tmp_path, url)
        login(config_path)
        async with Hub(load_config(config_path), load_plugin_modules=False) as hub:
            with anyio.fail_after(90):
                await hub.wait_ready(20)
                ok, text = await _call(hub)
                assert ok, text
                served = calls.read_text().count("\n")
                out = await anyio.to_thread.run_sync(hub_cli, config_path, "logout", "prot")
                assert out.returncode == 0 and "deleted" in out.stderr
                # Bounded by fail_after: the token itself is good for 600 s more.
                took = await _until_needs_login(hub)
                assert _state(hub) == "needs_login"
                upstream = next(u for u in hub.status()["upstreams"] if u["name"] == "prot")
                assert "mcp-hub login prot" in str(upstream["last_error"])
                ok, text = await _call(hub)
                assert not ok and "mcp-hub login prot" in text, text
                assert calls.read_text().count("\n") == served  # the old token went nowhere
                # A new login brings it back without a restart.
                await anyio.to_thread.run_sync(login, config_path)
                while _state(hub) != "ready":
                    await anyio.sleep(0.1)
                ok, text = await _call(hub)
                assert ok, text
    print(f"logout reached the running hub after {took:.2f} s")


async def test_tokens_never_reach_logs_status_or_metrics(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with auth_server(token_seconds=2) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt") as url:
        config_path = server_toml(tmp_path, url)
        login(config_path)
        config = load_config(config_path)
        store = token_store("prot", config.servers["prot"])
        first = await store.get_tokens()
        assert first is not None and first.refresh_token
        seen = {first.access_token, first.refresh_token}  # rotated by every refresh
        async with Hub(config, load_plugin_modules=False) as hub:
            with anyio.fail_after(60):
                await hub.wait_ready(20)
                while auth.stats()["token"].get("refresh_token", 0) < 2:
                    ok, text = await _call(hub)
                    assert ok, text
                    tokens = await store.get_tokens()
                    assert tokens is not None and tokens.refresh_token
                    seen |= {tokens.access_token, tokens.refresh_token}
                    await anyio.sleep(0.5)  # let the token age
                outputs = [caplog.text, json.dumps(hub.status()),
                           hub.metrics.render(upstreams=hub.upstream_statuses(),
                                              list_changed=hub.sessions.sent,
                                              sessions=hub.sessions.count)]
    assert len(seen) >= 4
    for canary in seen:
        for out in outputs:
            assert canary not in out


async def test_login_speaks_the_servers_era(tmp_path: Path) -> None:
    # A 2026-07-28-only server refuses `initialize`: login's check of the fresh
    # tokens connects the way the hub will (server/discover for protocol = "2026").
    with auth_server(token_seconds=60) as auth, \
            protected_server(auth.url, tmp_path / "calls.txt", "--modern-only") as url:
        config_path = server_toml(tmp_path, url, server='protocol = "2026"\n')
        login(config_path)
        assert auth.stats()["token"] == {"authorization_code": 1}
        called = hub_cli(config_path, "call", "p_whoami")
        assert called.returncode == 0, called.stderr
        assert "sub=" in called.stdout
