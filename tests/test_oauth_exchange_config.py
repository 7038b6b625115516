"""``mcp-hub check`` on the exchange grants: each incomplete combination is refused,
naming what is missing; the complete ones pass.

Also: a refused exchange (a real token endpoint answering ``invalid_grant``) is an
error naming the upstream and the server's ``error``, made of one request; the
caller's own token and the exchanged one never appear in it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp_hub.config.oauth import OAuthSettings
from mcp_hub.redact import redact
from mcp_hub.upstream.oauth.exchange import ExchangeAuth, ExchangeRefused, file_subject
from mcp_hub.upstream.oauth.kvstore import FileStateStore
from mcp_hub.upstream.oauth.secretbox import SecretBox, load_key
from mcp_hub.upstream.oauth.tokens import TokenStore
from tests.oauth_parts import free_port, hub_cli

UPSTREAM = "http://127.0.0.1:9/mcp"
AUTH = '[auth]\nissuer = "https://idp.test"\naudience = "https://hub.test/mcp"\n'

CASES = [
    ('grant = "token_exchange"\nclient_id = "c"\ntoken_endpoint = "https://as.test/token"',
     "", 'either subject = "caller" or subject_token_file'),
    ('grant = "token_exchange"\nsubject = "caller"\ntoken_endpoint = "https://as.test/token"',
     AUTH, "needs client_id"),
    ('grant = "token_exchange"\nsubject = "caller"\nclient_id = "c"', AUTH,
     "needs token_endpoint, or issuer"),
    ('grant = "token_exchange"\nsubject = "caller"\nclient_id = "c"\n'
     'token_endpoint = "https://as.test/token"', "", "needs [auth]"),
    ('grant = "id_jag"\nsubject = "caller"\nclient_id = "c"\nissuer = "https://as.test"\n'
     'idp_token_endpoint = "https://idp.test/token"\nidp_client_id = "i"', AUTH,
     "needs client_secret"),
    ('grant = "id_jag"\nsubject_token_file = "/t"\nclient_id = "c"\nclient_secret = "s"\n'
     'idp_token_endpoint = "https://idp.test/token"\nidp_client_id = "i"', "", "needs issuer"),
    ('grant = "id_jag"\nsubject_token_file = "/t"\nclient_id = "c"\nclient_secret = "s"\n'
     'issuer = "https://as.test"', "", "needs idp_token_endpoint and idp_client_id"),
    ('grant = "client_credentials"\nclient_id = "c"\nclient_secret = "s"\nsubject = "caller"',
     AUTH, "belong to grant 'token_exchange' or 'id_jag'"),
]


def _config(tmp: Path, oauth: str, extra: str) -> Path:
    path = tmp / "servers.toml"
    path.write_text(f'[hub]\nstate_dir = "{tmp / "state"}"\n\n[servers.up]\nurl = "{UPSTREAM}"\n'
                    f'auth = "oauth"\n\n[servers.up.oauth]\n{oauth}\n\n{extra}')
    return path


@pytest.mark.parametrize(("oauth", "extra", "missing"), CASES)
def test_check_names_what_an_exchange_grant_lacks(tmp_path: Path, oauth: str, extra: str,
                                                  missing: str) -> None:
    result = hub_cli(_config(tmp_path, oauth, extra), "check")
    assert result.returncode == 2, result.stdout + result.stderr
    assert missing in result.stderr, result.stderr


def test_complete_exchange_grants_load(tmp_path: Path) -> None:
    caller = OAuthSettings(grant="token_exchange", subject="caller", client_id="c",
                           token_endpoint="https://as.test/token")
    assert caller.per_caller
    assert caller.subject_type == "urn:ietf:params:oauth:token-type:access_token"
    subject = tmp_path / "id-token"
    subject.write_text("an-id-token\n")
    jag = OAuthSettings(grant="id_jag", subject_token_file=str(subject), client_id="c",
                        client_secret="s", issuer="https://as.test",
                        idp_token_endpoint="https://idp.test/token", idp_client_id="i")
    assert not jag.per_caller
    assert jag.subject_type == "urn:ietf:params:oauth:token-type:id_token"


@asynccontextmanager
async def _serving(routes: list[Route]) -> AsyncIterator[int]:
    """A uvicorn server of ``routes`` on a loopback port, started; yields the port."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), host="127.0.0.1",
                                           port=port, log_level="error"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            with anyio.fail_after(20):
                while not server.started:
                    await anyio.sleep(0.02)
            yield port
        finally:
            server.should_exit = True


def _exchange(tmp: Path, port: int, subject: str, resource: str, **settings: Any
              ) -> tuple[Callable[[], ExchangeAuth], TokenStore]:
    """Token exchange for ``resource`` at ``/token`` on ``port``, client ``hub``, the
    subject token read from a file holding ``subject``: a maker of ``ExchangeAuth``
    objects (each one a replica's) and the sealed store they share under ``tmp/oauth``."""
    path = tmp / "subject"
    path.write_text(subject)
    options = OAuthSettings(grant="token_exchange", subject_token_file=str(path),
                            client_id="hub", token_endpoint=f"http://127.0.0.1:{port}/token",
                            **settings)
    store = TokenStore(FileStateStore(tmp / "oauth"), SecretBox(load_key(tmp)), "prot",
                       resource)
    return lambda: ExchangeAuth("prot", resource, store, options, file_subject(str(path))), store


@pytest.mark.anyio
async def test_a_refused_exchange_names_the_upstream_and_the_error_once(tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []

    async def token(request: Request) -> JSONResponse:
        seen.append(dict(await request.form()))  # type: ignore[arg-type]
        return JSONResponse({"error": "invalid_scope",
                             "error_description": "mcp:admin is not granted"}, status_code=400)

    with anyio.fail_after(20):
        async with _serving([Route("/token", token, methods=["POST"])]) as port:
            new_auth, store = _exchange(tmp_path, port, "caller-own-token-0123456789\n",
                                        UPSTREAM, client_secret="s3cret-value",
                                        scopes=["mcp:admin"])
            auth = new_auth()
            with pytest.raises(ExchangeRefused) as refused:
                await auth.token()
    message = str(refused.value)
    assert message.startswith("prot: the authorization server refused the token exchange")
    assert "invalid_scope: mcp:admin is not granted" in message
    assert "caller-own-token" not in message and "s3cret" not in message
    assert len(seen) == 1 and auth.exchanges == 1
    assert seen[0]["subject_token"] == "caller-own-token-0123456789"
    assert seen[0]["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert seen[0]["resource"] == UPSTREAM and seen[0]["scope"] == "mcp:admin"
    assert not await store.has_tokens()


@pytest.mark.anyio
async def test_an_exchanged_token_is_cached_sealed_redacted_and_renewed_once_on_401(
        tmp_path: Path) -> None:
    issued: list[str] = []
    refuse_all = {"on": False}

    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        assert form["subject_token"] == "subject-token-abcdef"
        issued.append(f"opaque-upstream-token-{len(issued) + 1:04d}")
        return JSONResponse({"access_token": issued[-1], "token_type": "Bearer",
                             "expires_in": 3600})

    async def mcp(request: Request) -> JSONResponse:
        sent = request.headers.get("authorization", "")
        if refuse_all["on"] or sent == "Bearer opaque-upstream-token-0001":
            return JSONResponse({"error": "invalid_token"}, status_code=401)
        return JSONResponse({"sent": sent})

    routes = [Route("/token", token, methods=["POST"]), Route("/mcp", mcp, methods=["POST"])]
    with anyio.fail_after(20):
        async with _serving(routes) as port:
            upstream = f"http://127.0.0.1:{port}/mcp"
            new_auth, _ = _exchange(tmp_path, port, "subject-token-abcdef", upstream)
            auth = new_auth()
            async with httpx2.AsyncClient(auth=auth) as http:
                # The first token is refused upstream: one more exchange, one resend.
                first = await http.post(upstream, json={})
                assert first.json() == {"sent": "Bearer opaque-upstream-token-0002"}
                assert len(issued) == 2
                # Cached: no exchange.
                again = await http.post(upstream, json={})
                assert again.status_code == 200 and len(issued) == 2
                # A fresh object (another replica) reads the stored token: no exchange.
                other = new_auth()
                assert await other.token() == issued[-1] and len(issued) == 2
                # The upstream refuses every token: one renewal, then the 401 stands.
                refuse_all["on"] = True
                refused = await http.post(upstream, json={})
                assert refused.status_code == 401 and len(issued) == 3
    assert redact(f"sent {issued[-1]}") == "sent [REDACTED]"
    stored = b"".join(p.read_bytes() for p in (tmp_path / "oauth").iterdir())
    assert b"opaque-upstream-token" not in stored and b"subject-token" not in stored
