"""Real parts for the token-exchange tests and benchmark: the upstream's authorization
server doing RFC 8693 (oauth2-mock-server from npm with the grant added,
``tests/fixtures/oauth/exchange_server.mjs``) and a hub config acting as each caller."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import types

from tests.auth_support import AUDIENCE
from tests.hubtest import ROOT, HttpHub, http_session
from tests.oauth_parts import require_parts

EXCHANGE_SERVER = ROOT / "tests" / "fixtures" / "oauth" / "exchange_server.mjs"


class ExchangeServer:
    """The upstream's authorization server (token exchange) and its test routes."""

    def __init__(self, url: str) -> None:
        self.url = url

    def stats(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx2.get(f"{self.url}/test/stats", timeout=5).json()
        return data

    def refuse(self, sub: str) -> None:
        httpx2.post(f"{self.url}/test/refuse", json={"sub": sub}, timeout=5).raise_for_status()


@contextmanager
def exchange_server(idp_issuer: str, token_seconds: int = 600, jag_issuer: str | None = None
                    ) -> Iterator[ExchangeServer]:
    """The authorization server; with ``jag_issuer`` it also takes that server's ID-JAGs."""
    node = require_parts()
    proc = subprocess.Popen([node, str(EXCHANGE_SERVER), idp_issuer, str(token_seconds),
                             *([jag_issuer] if jag_issuer else [])],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # bounded: the process prints or exits
        assert line.startswith("READY "), f"exchange server did not start: {line!r}"
        yield ExchangeServer(line.split(" ", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def exchange_config(tmp: Path, upstream: str, idp: str, upstream_as: str,
                    redis_url: str | None, *, oauth: str | None = None, hub: str = "") -> Path:
    """A hub with [auth] and one server acting as each caller: token exchange at
    ``upstream_as`` unless ``oauth`` gives another ``[servers.prot.oauth]`` body."""
    state = f'[state]\nurl = "{redis_url}"\n\n' if redis_url else ""
    oauth = oauth or ('grant = "token_exchange"\nsubject = "caller"\nclient_id = "hub-client"\n'
                      f'client_secret = "hub-secret"\nissuer = "{upstream_as}"\n')
    path = tmp / "servers.toml"
    path.write_text(
        f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 20\n\n{hub}{state}'
        f'[servers.prot]\nurl = "{upstream}"\nauth = "oauth"\nprefix = "p"\n'
        f'connect_timeout = 10\n\n[servers.prot.oauth]\n{oauth}\n'
        f'[auth]\nissuer = "{idp}"\naudience = "{AUDIENCE}"\n')
    return path


async def whoami(hub: HttpHub, headers: dict[str, str]) -> types.CallToolResult:
    """List (opening the caller's session when only the placeholder shows), then whoami."""
    async with http_session(hub.mcp_url, headers=headers) as session:
        listed = [t.name for t in (await session.list_tools()).tools if t.name.startswith("p")]
        if "p_whoami" not in listed:
            opened = await session.call_tool(listed[0], {})
            if opened.is_error:
                return opened
        return await session.call_tool("p_whoami", {})
