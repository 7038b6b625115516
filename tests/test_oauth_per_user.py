"""Per-user OAuth to an upstream (``oauth_per_user = true``), with real parts only.

Two real oauth2-mock-server processes: one signs the hub's own callers in
(``[auth]``, JWTs with ``sub`` alice, bob, carol), the other is the upstream's
authorization server. The upstream is an MCP server built with the Python SDK's
``AuthSettings``/``TokenVerifier`` that checks every token and records the
``sub`` of each call. The hub runs as a real process over Streamable HTTP.

Alice and Bob each get a URL-mode elicitation, follow its URL headlessly
(the hub's ``/connect`` page, a browser sign-in at the hub as the link's owner,
the upstream's authorization server, the hub's callback),
and their calls then reach the upstream with their own tokens. Carol's client
declares no URL elicitation: she gets the URL-elicitation-required error and
no data. A per-user call's progress and log messages reach its client.
Tokens never show in the hub's log, status, metrics or audit file, and
the store on disk holds none in plain text.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import URL_ELICITATION_REQUIRED

from mcp_hub.config.model import load_config
from mcp_hub.upstream.oauth.attach import token_store
from tests.auth_support import AuthServer, bearer, browser_hub_config
from tests.erastest import on_roots, on_sampling
from tests.hubtest import HttpHub, http_session, text_of
from tests.oauth_parts import hub_cli, per_user_hub, per_user_server_toml, readable_token

pytestmark = pytest.mark.anyio

def _config(tmp: Path, upstream: str, issuer: str) -> Path:
    audit = f'[audit]\npath = "{tmp / "audit.jsonl"}"\ninclude_arguments = true\n'
    return browser_hub_config(tmp, issuer, body=per_user_server_toml(upstream), tail=audit)


def _subs(calls: Path) -> list[str]:
    if not calls.exists():
        return []
    return [line.split()[1] for line in calls.read_text().splitlines()]


class Browser:
    """Follows connect URLs headlessly, as the person with ``upstream_sub`` at the upstream's AS
    who signs in to the hub (``[auth.browser]``) as ``hub_sub``."""

    def __init__(self, upstream_as: str, upstream_sub: str, hub_as: AuthServer,
                 hub_sub: str) -> None:
        self.upstream_as = upstream_as
        self.upstream_sub = upstream_sub
        self.hub_as, self.hub_sub = hub_as, hub_sub
        self.urls: list[str] = []
        self.ids: list[str] = []
        self.completed: list[str] = []
        self.pages: list[httpx2.Response] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams
                     ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert params.elicitation_id
        self.urls.append(params.url)
        self.ids.append(params.elicitation_id)
        async with httpx2.AsyncClient(timeout=30) as http:
            # Who the upstream's authorization server signs in (it redirects at once).
            (await http.post(f"{self.upstream_as}/test/subject",
                             json={"sub": self.upstream_sub})).raise_for_status()
        await self.hub_as.login(self.hub_sub)  # who signs in to the hub on the way
        async with httpx2.AsyncClient(timeout=60, follow_redirects=True) as browser:
            page = await browser.get(params.url)
        self.pages.append(page)
        return types.ElicitResult(action="accept")

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


async def _connect_and_call(hub: HttpHub, headers: dict[str, str], browser: Browser
                            ) -> tuple[str, list[str]]:
    async with http_session(hub.mcp_url, headers=headers, elicitation_callback=browser.elicit,
                            message_handler=browser.on_message) as session:
        first = await session.list_tools()
        names = [t.name for t in first.tools if t.name.startswith("p_")]
        if names == ["p_connect"]:
            # Nobody connected yet: the placeholder's call elicits, runs the flow, lists.
            connected = await session.call_tool("p_connect", {})
            assert not connected.is_error and "Connected to prot" in text_of(connected)
            listed = [t.name for t in (await session.list_tools()).tools if t.name.startswith("p_")]
            assert "p_whoami" in listed and "p_connect" not in listed
        # Bob's first call of a real tool: a URL elicitation, the flow, then the call.
        result = await session.call_tool("p_whoami", {})
        assert not result.is_error, text_of(result)
        return text_of(result), names


async def test_two_users_connect_their_own_accounts_a_third_gets_the_url_error(
        tmp_path: Path) -> None:
    async with per_user_hub(tmp_path, partial(_config, tmp_path)) as parts:
        with anyio.fail_after(120):
            await _scenario(parts.hub, parts.sign_in, parts.upstream_as.url, parts.config,
                            parts.calls, tmp_path)


async def _scenario(hub: HttpHub, auth: AuthServer, upstream_as: str, config_path: Path,
                    calls: Path, tmp: Path) -> None:
    alice_h, bob_h, carol_h = [await bearer(auth, s) for s in ("alice", "bob", "carol")]
    alice = Browser(upstream_as, "gh-alice", auth, "alice")
    text, names = await _connect_and_call(hub, alice_h, alice)
    assert names == ["p_connect"], "before anyone connected: the placeholder alone"
    assert text.startswith("sub=gh-alice "), text
    assert len(alice.urls) == 1 and alice.urls[0].startswith(f"{hub.base}/connect/prot?t=")
    assert alice.pages[0].status_code == 200 and "Connected to prot" in alice.pages[0].text
    # The link is single-use: opening it again, signed in as its owner, is refused.
    await auth.login("alice")
    async with httpx2.AsyncClient(timeout=30) as http:
        again = await http.get(alice.urls[0], follow_redirects=True)
    assert again.status_code == 403 and "already used" in again.text

    bob = Browser(upstream_as, "gh-bob", auth, "bob")
    text, names = await _connect_and_call(hub, bob_h, bob)
    assert "p_whoami" in names and "p_echo" in names, "after a connect: the upstream's catalog"
    assert text.startswith("sub=gh-bob "), text
    # The upstream saw each person's upstream account (its AS's `sub`), never the hub token.
    assert _subs(calls) == ["gh-alice", "gh-bob"]
    # Each finished connect told its client: notifications/elicitation/complete.
    assert alice.completed == alice.ids and bob.completed == bob.ids

    # Later calls: each on its own session with its own token, no new elicitation.
    for headers, who, browser in ((alice_h, "gh-alice", alice), (bob_h, "gh-bob", bob)):
        async with http_session(hub.mcp_url, headers=headers,
                                elicitation_callback=browser.elicit) as session:
            for _ in range(2):
                result = await session.call_tool("p_whoami", {})
                assert text_of(result).startswith(f"sub={who} "), text_of(result)
    assert len(alice.urls) == 1 and len(bob.urls) == 1
    assert _subs(calls) == ["gh-alice", "gh-bob", "gh-alice", "gh-alice", "gh-bob", "gh-bob"]

    # Carol's client has no URL elicitation: the -32042 error with the connect URL, no data.
    async with http_session(hub.mcp_url, headers=carol_h) as session:
        with pytest.raises(MCPError) as caught:
            await session.call_tool("p_whoami", {})
    error = caught.value.error
    assert error.code == URL_ELICITATION_REQUIRED
    assert isinstance(error.data, dict)
    carol_url = error.data["elicitations"][0]["url"]
    assert carol_url.startswith(f"{hub.base}/connect/prot?t=")
    assert error.data["elicitations"][0]["mode"] == "url"
    assert "sub=" not in json.dumps(error.data)
    assert _subs(calls) == ["gh-alice", "gh-bob", "gh-alice", "gh-alice", "gh-bob", "gh-bob"], "carol got no data"
    # Carol's link does not name another identity's flow: a link forged for alice fails.
    ticket = carol_url.split("t=", 1)[1]
    body, _, mac = ticket.partition(".")
    async with httpx2.AsyncClient(timeout=30) as http:
        forged = await http.get(f"{hub.base}/connect/prot?t={body[:-2]}xx.{mac}")
        stray = await http.get(f"{hub.base}/connect/callback?state=nope&code=x")
    assert forged.status_code == 403 and stray.status_code == 400

    await _progress_and_logs_reach_the_caller(hub, alice_h, alice)
    await _questions_reach_the_caller(hub, alice_h, alice)
    await _no_token_anywhere(hub, alice_h, config_path, tmp)

    # An administrator removes Bob's tokens: the hub closes his live session within
    # seconds (Alice's stays), and his next call asks him to connect again.
    assert await _user_sessions(hub, alice_h) == 2
    out = await anyio.to_thread.run_sync(
        lambda: hub_cli(config_path, "logout", "prot", "--identity", "bob"))
    assert out.returncode == 0 and "stored tokens of bob deleted" in out.stderr, out.stderr
    with anyio.fail_after(15):
        while await _user_sessions(hub, alice_h) != 1:
            await anyio.sleep(0.1)  # polling the status, the subject here
    refused = await anyio.to_thread.run_sync(lambda: hub_cli(config_path, "login", "prot"))
    assert refused.returncode != 0 and "per user" in refused.stderr
    async with http_session(hub.mcp_url, headers=bob_h, elicitation_callback=bob.elicit,
                            message_handler=bob.on_message) as session:
        result = await session.call_tool("p_whoami", {})
    assert text_of(result).startswith("sub=gh-bob ") and len(bob.urls) == 2


async def _user_sessions(hub: HttpHub, headers: dict[str, str]) -> int:
    """The live per-user sessions of ``prot``, from the running hub's /status.json."""
    async with httpx2.AsyncClient(timeout=30, headers=headers) as http:
        status = (await http.get(f"{hub.base}/status.json")).json()
    return int(next(s["user_sessions"] for s in status["per_user"] if s["name"] == "prot"))


async def _progress_and_logs_reach_the_caller(hub: HttpHub, headers: dict[str, str],
                                              browser: Browser) -> None:
    """A per-user session relays the upstream's progress and log messages of a call."""
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with http_session(hub.mcp_url, headers=headers, elicitation_callback=browser.elicit,
                            logging_callback=on_log) as session:
        result = await session.call_tool("p_count", {"steps": 3}, progress_callback=on_progress)
    assert text_of(result) == "counted to 3", text_of(result)
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert logs == ["counted 1", "counted 2", "counted 3"]


async def _questions_reach_the_caller(hub: HttpHub, headers: dict[str, str],
                                      browser: Browser) -> None:
    """A per-user upstream's sampling, form elicitation and roots requests reach the caller."""

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        if isinstance(params, types.ElicitRequestURLParams):
            return await browser.elicit(context, params)
        return types.ElicitResult(action="accept", content={"name": "Alice"})

    async with http_session(hub.mcp_url, headers=headers, elicitation_callback=elicit,
                            sampling_callback=on_sampling, list_roots_callback=on_roots) as session:
        result = await session.call_tool("p_ask", {"prompt": "hi"})
    assert text_of(result) == "model=echo:hi name=Alice roots=['file:///tmp/one']", text_of(result)
    # A client that cannot answer: the upstream gets an error, the call reports it.
    async with http_session(hub.mcp_url, headers=headers,
                            elicitation_callback=browser.elicit) as session:
        failed = await session.call_tool("p_ask", {"prompt": "hi"})
    assert failed.is_error, text_of(failed)


async def _no_token_anywhere(hub: HttpHub, headers: dict[str, str], config_path: Path,
                             tmp: Path) -> None:
    config = load_config(config_path)
    canaries: set[str] = set()
    for who in ("alice", "bob"):
        tokens = await token_store("prot", config.servers["prot"], f"user:{who}").get_tokens()
        assert tokens is not None and tokens.refresh_token
        canaries |= {tokens.access_token, tokens.refresh_token}
    hub_tokens = await token_store("prot", config.servers["prot"]).get_tokens()
    assert hub_tokens is None, "per-user tokens are never hub-wide tokens"
    carol = await token_store("prot", config.servers["prot"], "user:carol").get_tokens()
    assert carol is None
    async with httpx2.AsyncClient(timeout=30, headers=headers) as http:
        status = (await http.get(f"{hub.base}/status.json")).text
        metrics = (await http.get(f"{hub.base}/metrics")).text
    assert '"per_user"' in status
    outputs = {"log": hub.stderr(), "status": status, "metrics": metrics,
               "audit": (tmp / "audit.jsonl").read_text()}
    assert "p_whoami" in outputs["audit"]
    for canary in canaries:
        for where, out in outputs.items():
            assert canary not in out, f"a token in the {where}"
    blobs = [p.read_bytes() for p in (tmp / "state" / "oauth").glob("*.bin")]
    assert len(blobs) >= 3  # two users' tokens and the registered client
    for blob in blobs:
        assert not readable_token(blob)
        for canary in canaries:
            assert canary.encode() not in blob


async def test_per_user_needs_a_downstream_identity(tmp_path: Path) -> None:
    path = tmp_path / "servers.toml"
    path.write_text('[servers.gh]\nurl = "https://example.com/mcp"\nauth = "oauth"\n'
                    "oauth_per_user = true\n")
    with pytest.raises(Exception, match="oauth_per_user: the hub does not know who is calling"):
        load_config(path)
    path.write_text('[servers.gh]\nurl = "https://example.com/mcp"\noauth_per_user = true\n'
                    '[auth]\nissuer = "https://id.example.com"\n')
    with pytest.raises(Exception, match='oauth_per_user needs auth = "oauth"'):
        load_config(path)


_ = ClientSession  # the sessions above are the SDK's ClientSession


async def _whoami_once_expired(hub: HttpHub, headers: dict[str, str], browser: Browser) -> str:
    """``p_whoami`` once the 2-second upstream token has expired; the result's text."""
    await anyio.sleep(2.5)  # let the 2-second token expire; the clock is the subject
    async with http_session(hub.mcp_url, headers=headers,
                            elicitation_callback=browser.elicit) as session:
        return text_of(await session.call_tool("p_whoami", {}))


async def test_a_refused_refresh_asks_the_user_to_connect_again(tmp_path: Path) -> None:
    async with per_user_hub(tmp_path, partial(_config, tmp_path), token_seconds=2) as parts:
        hub, auth, upstream_as = parts.hub, parts.sign_in, parts.upstream_as
        with anyio.fail_after(90):
            headers = await bearer(auth, "alice")
            alice = Browser(upstream_as.url, "alice", auth, "alice")
            text, _ = await _connect_and_call(hub, headers, alice)
            assert text.startswith("sub=alice "), text
            text = await _whoami_once_expired(hub, headers, alice)
            assert text.startswith("sub=alice "), text
            assert len(alice.urls) == 1, "an expired token is refreshed, not re-connected"
            assert upstream_as.stats()["token"].get("refresh_token", 0) >= 1
            upstream_as.revoke_refresh_tokens()
            text = await _whoami_once_expired(hub, headers, alice)
            assert text.startswith("sub=alice "), text
            assert len(alice.urls) == 2, "the refused refresh led to a second connect"
    assert _subs(parts.calls) == ["alice", "alice", "alice"]
