"""Rewritten arguments filled in from the environment (a secret) and from the caller's identity.

A real hub over HTTP with sign-in against a real OAuth provider (oauth2-mock-server,
tests/auth_support.py) in front of the real SDK upstream: two signed-in identities
get their own ``{identity.sub}``/``{identity.email}`` values; a caller without the
claim is refused; the ``${ENV}`` value reaches the upstream and no listing or log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.auth_support import AuthServer, oauth_server
from tests.hubtest import HttpHub, http_hub, http_session, write_config
from tests.rewrite_support import TRACKER, structured, text

pytestmark = pytest.mark.anyio

CI_TOKEN = "ci-token-0123456789abcdef"
SECRET_REPO = "repo-secret-9c1d7e5b"

RULES = """
[servers.tracker.tools.create_issue]
name = "file_issue"

[servers.tracker.tools.create_issue.arguments.owner]
fixed = "{identity.sub}"

[servers.tracker.tools.create_issue.arguments.repo]
default = "${TRACKER_REPO}"

[servers.tracker.tools.create_issue.arguments.body]
fixed = "reported by {identity.email}"
"""


#: The audience the hub checks tokens against (a hub on a random port names it in its config).
AUDIENCE = "https://hub.example.test/mcp"


def _config(tmp: Path, issuer: str) -> Path:
    body = TRACKER + RULES + (f'\n[auth]\nissuer = "{issuer}"\naudience = "{AUDIENCE}"\n'
                              'required_scopes = ["mcp"]\n')
    body += f'\n[audit]\npath = "{tmp / "audit.jsonl"}"\ninclude_arguments = true\n'
    hub = f'[hub.http]\nauth_tokens = [{{ name = "ci", token = "{CI_TOKEN}" }}]\n'
    return write_config(tmp, body, hub=hub)


async def _token(auth: AuthServer, hub: HttpHub, sub: str, **claims: Any) -> str:
    return await auth.token(sub=sub, aud=AUDIENCE, scope="mcp", client_id="vscode",
                            **claims)


async def _create(hub: HttpHub, token: str, title: str) -> Any:
    async with http_session(hub.mcp_url, headers={"Authorization": f"Bearer {token}"}) as s:
        listed = {t.name: t for t in (await s.list_tools()).tools}
        schema = listed["tracker_file_issue"].input_schema
        assert "owner" not in schema["properties"] and "body" not in schema["properties"]
        assert "default" not in schema["properties"]["repo"]
        return await s.call_tool("tracker_file_issue", {"title": title})


async def test_two_identities_get_their_own_values_and_the_secret_stays_hidden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_REPO", SECRET_REPO)
    with anyio.fail_after(150):
        async with oauth_server() as auth, http_hub(_config(tmp_path, auth.issuer),
                                                    tmp_path) as hub:
            alice = await _token(auth, hub, "alice", email="alice@example.com")
            bob = await _token(auth, hub, "bob", email="bob@example.com")
            a = await _create(hub, alice, "from alice")
            b = await _create(hub, bob, "from bob")
            assert not a.is_error and not b.is_error, (text(a), text(b))
            assert structured(a)["owner"] == "alice"
            assert structured(a)["body"] == "reported by alice@example.com"
            assert structured(b)["owner"] == "bob"
            assert structured(b)["body"] == "reported by bob@example.com"
            assert structured(a)["repo"] == structured(b)["repo"] == SECRET_REPO

            # No email claim: refused with a clear error, never forwarded.
            carol = await _token(auth, hub, "carol")
            refused = await _create(hub, carol, "from carol")
            assert refused.is_error and "claim 'email'" in text(refused)
            # A static token has no sub either.
            refused = await _create(hub, CI_TOKEN, "from ci")
            assert refused.is_error and "claim 'sub'" in text(refused)
            async with http_session(hub.mcp_url,
                                    headers={"Authorization": f"Bearer {alice}"}) as s:
                assert text(await s.call_tool("tracker_received", {})) == "2"
    assert SECRET_REPO not in hub.stderr()
    audit = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    calls = [a for a in audit if a.get("tool") == "tracker_file_issue"]
    assert calls and all(a["upstream_tool"] == "create_issue" for a in calls)
    assert {a["identity"] for a in calls} >= {"alice", "bob"}
    assert SECRET_REPO not in json.dumps(audit)
