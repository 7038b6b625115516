"""A real authorization server for the sign-in tests: oauth2-mock-server (npm) under Node.

:func:`oauth_server` starts ``tests/fixtures/oauth_server.mjs`` on an ephemeral
loopback port and yields an :class:`AuthServer` that mints tokens signed by the
server's own keys, rotates them, registers opaque tokens for introspection and
chooses who the next browser sign-in is, and counts key-set fetches and
introspection requests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.hubtest import ROOT

NODE = ROOT / "js" / "node_modules" / ".bin" / "node"
MOCK = ROOT / "js" / "node_modules" / "oauth2-mock-server"
SCRIPT = ROOT / "tests" / "fixtures" / "oauth_server.mjs"

#: The hub's own audience: [auth] needs it (or a public_url), never the request's Host.
AUDIENCE = "https://hub.test/mcp"


def need_mock_server() -> None:
    """Skip (outside CI) or fail (CI=true) when Node or oauth2-mock-server is missing."""
    node = NODE if NODE.exists() else shutil.which("node")
    if node is None or not MOCK.exists():
        reason = "oauth2-mock-server needs Node 22 and `npm install` in js/"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


class AuthServer:
    """The running authorization server and its test routes."""

    def __init__(self, issuer: str, http: httpx2.AsyncClient) -> None:
        self.issuer = issuer
        self.http = http

    async def token(self, *, expires_in: int = 3600, kid: str | None = None, **claims: Any) -> str:
        body: dict[str, Any] = {"claims": claims, "expiresIn": expires_in}
        if kid is not None:
            body["kid"] = kid
        r = await self.http.post(f"{self.issuer}/test/token", json=body)
        r.raise_for_status()
        return str(r.json()["token"])

    async def rotate(self, kid: str) -> None:
        (await self.http.post(f"{self.issuer}/test/rotate", json={"kid": kid})).raise_for_status()

    async def opaque(self, token: str, answer: dict[str, Any]) -> None:
        r = await self.http.post(f"{self.issuer}/test/opaque", json={"token": token, "answer": answer})
        r.raise_for_status()

    async def counts(self) -> dict[str, int]:
        """Requests served so far: ``jwks`` (key-set fetches) and ``introspect``."""
        r = await self.http.get(f"{self.issuer}/test/counts")
        r.raise_for_status()
        return {k: int(v) for k, v in r.json().items()}

    async def login(self, sub: str, **claims: Any) -> None:
        r = await self.http.post(f"{self.issuer}/test/login", json={"sub": sub, "claims": claims})
        r.raise_for_status()


@asynccontextmanager
async def oauth_server() -> AsyncIterator[AuthServer]:
    need_mock_server()
    node = str(NODE) if NODE.exists() else str(shutil.which("node"))
    proc = subprocess.Popen([node, str(SCRIPT)], cwd=str(ROOT), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        with anyio.fail_after(20):
            line = await anyio.to_thread.run_sync(proc.stdout.readline)
        if not line:
            raise RuntimeError(f"oauth2-mock-server did not start: {proc.stderr.read() if proc.stderr else ''!r}")
        issuer = json.loads(line)["issuer"]
        async with httpx2.AsyncClient(timeout=10) as http:
            yield AuthServer(issuer, http)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.terminate()
        await anyio.to_thread.run_sync(lambda: proc.wait(10))


async def bearer(idp: AuthServer, sub: str) -> dict[str, str]:
    """An ``Authorization`` header with a token ``idp`` signs for ``sub`` and the hub."""
    return {"Authorization": f"Bearer {await idp.token(sub=sub, aud=AUDIENCE, scope='mcp')}"}


def browser_hub_config(tmp: Path, issuer: str, *, body: str = "", tail: str = "") -> Path:
    """``servers.toml`` of a hub whose callers sign in at ``issuer``, with a token
    (``[auth]``) or in a browser (``[auth.browser]``); ``body`` goes before ``[auth]``,
    ``tail`` after ``[auth.browser]``."""
    path = tmp / "servers.toml"
    path.write_text(
        f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 20\n\n{body}'
        f'[auth]\nissuer = "{issuer}"\naudience = "{AUDIENCE}"\n\n'
        f'[auth.browser]\nclient_id = "hub-browser"\n\n{tail}')
    return path
