"""Tool rewrites on two hub replicas behind a real haproxy (round-robin) and a real Redis.

One client session moves between the replicas (sealed sessions): every request,
whichever replica takes it, sees the same rewritten tools and has its arguments
rewritten the same way; each replica's status shows the exposed names it served.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from tests.hubtest import http_session
from tests.replica_support import replicas, shared_state
from tests.rewrite_support import PROFILE, REWRITES, TRACKER, structured, text

pytestmark = pytest.mark.anyio

TOKEN = "rewrite-replica-token-aaaaaaaaaaaaaaaa"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _config(tmp: Path, redis_url: str) -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        "[hub]\nstartup_timeout = 20\n\n"
        + shared_state(redis_url, f'auth_tokens = ["{TOKEN}"]\n') + TRACKER + REWRITES + PROFILE)
    return path


@pytest.mark.parametrize("profile", [None, "support"])
async def test_two_replicas_rewrite_every_call_of_a_moving_session_alike(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str | None) -> None:
    name, title = ("report_issue", "headline") if profile else ("tracker_new_issue", "summary")
    with anyio.fail_after(150):
        async with replicas(tmp_path, monkeypatch, lambda url: _config(tmp_path, url),
                            2) as running:
            path = f"/p/{profile}/mcp" if profile else "/mcp"
            async with http_session(f"http://127.0.0.1:{running.port}{path}",
                                    headers=AUTH) as session:
                for i in range(6):
                    listed = {t.name: t for t in (await session.list_tools()).tools}
                    assert title in listed[name].input_schema["properties"]
                    made = await session.call_tool(name, {"repo": "web", title: f"t{i}"})
                    assert not made.is_error, text(made)
                    got = structured(made)
                    assert (got["owner"], got["title"]) == ("acme", f"t{i}")
                    assert got["labels"] == (["customer"] if profile else ["triage"])
                    refused = await session.call_tool(name, {"repo": "w", title: "x",
                                                             "owner": "evil"})
                    assert refused.is_error and "owner" in text(refused)
            async with httpx2.AsyncClient(timeout=30) as client:
                for hub in running.hubs:
                    status = (await client.get(f"{hub.base}/status.json", headers=AUTH)).json()
                    assert name in {c["tool"] for c in status["recent_calls"]}, status
