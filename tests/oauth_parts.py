"""Real parts for the OAuth tests: the authorization server (oauth2-mock-server from
npm, ``tests/fixtures/oauth/auth_server.mjs``), the protected upstream (the Python
SDK's ``AuthSettings`` + ``TokenVerifier``, ``tests/fixtures/oauth/protected_server.py``)
and ``mcp-hub login`` run the way a person would, with the URL followed headlessly."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests import auth_support
from tests.hubtest import PY, ROOT, HttpHub, http_hub, hub_env

#: A JSON Web Token in the clear: a base64url JSON header, a dot, a JSON payload.
#: A sealed (Fernet) value is one base64url run without dots, so it never matches,
#: whereas "eyJ" alone turns up in one random ciphertext of a few hundred.
_JWT = re.compile(rb"eyJ[A-Za-z0-9_-]*\.eyJ")


def readable_token(blob: bytes) -> bool:
    """Whether ``blob`` holds an OAuth token readable as it is: a JWT, or token JSON."""
    return _JWT.search(blob) is not None or b"access_token" in blob


AUTH_SERVER = ROOT / "tests" / "fixtures" / "oauth" / "auth_server.mjs"
MOCK_PACKAGE = ROOT / "js" / "node_modules" / "oauth2-mock-server"


def require_parts() -> str:
    """The node binary; skips (fails in CI) when node or oauth2-mock-server is missing."""
    node = shutil.which("node")
    if node is None or not MOCK_PACKAGE.exists():
        reason = "needs node and js/node_modules/oauth2-mock-server (make setup)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return node


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class AuthServer:
    url: str

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx2.get(f"{self.url}/test/stats", timeout=5).json()
        return data

    def token_requests(self) -> int:
        return sum(self.stats()["token"].values())

    def revoke_refresh_tokens(self) -> None:
        httpx2.post(f"{self.url}/test/revoke-refresh", timeout=5).raise_for_status()


@contextmanager
def auth_server(token_seconds: int, *, cimd: bool = False) -> Iterator[AuthServer]:
    """The authorization server; ``cimd`` makes it accept Client ID Metadata Documents."""
    node = require_parts()
    proc = subprocess.Popen([node, str(AUTH_SERVER), "0", str(token_seconds),
                             *(["cimd"] if cimd else [])],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # bounded: the process prints or exits
        assert line.startswith("READY "), f"auth server did not start: {line!r}"
        yield AuthServer(line.split(" ", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def protected_server(issuer: str, calls_file: Path, *extra: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [PY, "-m", "tests.fixtures.oauth.protected_server", "--port", str(port),
         "--issuer", issuer, "--calls-file", str(calls_file), *extra], cwd=ROOT, env=hub_env())
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(200):
            try:
                if httpx2.post(url, json={}, timeout=1).status_code == 401:
                    break
            except httpx2.HTTPError:
                pass
            if proc.poll() is not None:
                raise AssertionError("protected server exited")
            subprocess.run(["sleep", "0.1"], check=True)  # poll interval while it binds
        else:
            raise AssertionError("protected server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def server_toml(tmp: Path, url: str, oauth: str = "", server: str = "") -> Path:
    path = tmp / "servers.toml"
    path.write_text(f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 20\n\n'
                    f'[servers.prot]\nurl = "{url}"\nauth = "oauth"\nprefix = "p"\n'
                    f'connect_timeout = 10\n{server}\n[servers.prot.oauth]\n{oauth}\n')
    return path


@dataclass
class PerUserHub:
    """A running hub in front of the protected upstream, and the parts around it."""

    hub: HttpHub
    #: Where the hub's callers sign in (``[auth]``, ``[auth.browser]``).
    sign_in: auth_support.AuthServer
    #: The upstream's authorization server.
    upstream_as: AuthServer
    config: Path
    #: The upstream's record of calls, one line each.
    calls: Path


@asynccontextmanager
async def per_user_hub(tmp: Path, config: Callable[[str, str], Path], *,
                       token_seconds: int = 600) -> AsyncIterator[PerUserHub]:
    """The upstream's authorization server (tokens good for ``token_seconds``), the
    protected upstream, the hub's sign-in server and an HTTP hub with the config that
    ``config(upstream_url, sign_in_issuer)`` writes."""
    calls = tmp / "calls.txt"
    with auth_server(token_seconds=token_seconds) as upstream_as, \
            protected_server(upstream_as.url, calls) as upstream:
        async with auth_support.oauth_server() as sign_in:
            path = config(upstream, sign_in.issuer)
            async with http_hub(path, tmp) as hub:
                yield PerUserHub(hub, sign_in, upstream_as, path, calls)


def per_user_server_toml(upstream: str) -> str:
    """``[servers.prot]``: ``upstream`` behind OAuth, each caller connecting their own
    account (``oauth_per_user``), its tools prefixed ``p_``."""
    return (f'[servers.prot]\nurl = "{upstream}"\nauth = "oauth"\noauth_per_user = true\n'
            'prefix = "p"\nconnect_timeout = 10\n\n')


def hub_cli(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "mcp_hub", *args, "-c", str(config)], cwd=ROOT,
                          env=hub_env(), capture_output=True, text=True, timeout=timeout,
                          check=False)


def login(config: Path) -> tuple[str, str]:
    """``mcp-hub login prot --no-browser``; follows the one URL it prints. (url, stderr)"""
    proc = subprocess.Popen([PY, "-m", "mcp_hub", "login", "prot", "--no-browser",
                             "--timeout", "30", "-c", str(config)], cwd=ROOT, env=hub_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), url
    httpx2.get(url, follow_redirects=True, timeout=10)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out == "", "the URL is the only thing on stdout"
    return url, err
