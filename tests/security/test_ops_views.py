"""The operations views (``/status.json``, ``/metrics``) show each identity only what it reaches.

Real hubs over HTTP with named static tokens and ``[[access]]`` rules: a narrow
identity (a profile exposing one server) sees none of another server's names,
tool names, rejected tools or calls, and neither the other identity's name nor
its counters; an ``admin = true`` rule sees everything. Unknown tool names are
counted under one label, however many are tried.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from tests.hubtest import HttpHub, echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

NARROW = "narrow-token-0123456789abcdef"
HIDDEN = "hidden-token-0123456789abcdef"
ROOT_TOKEN = "root-token-0123456789abcdefgh"
#: Words that name the server, tools and identity the narrow identity must never see.
SECRET_WORDS = ("vault", "zeta")


def _config(tmp: Path, *, admin: bool = True) -> Path:
    root = 'match = "token:root"\nadmin = true' if admin else 'match = "token:root"'
    body = (echo_server_toml("alpha") + echo_server_toml("vault") + f'''
[profiles.small]
toolsets = ["mcp-alpha", "hub"]

[profiles.locked]
toolsets = ["mcp-vault"]

[[access]]
{root}

[[access]]
match = "token:lane"
profile = "small"

[[access]]
match = "token:zeta"
profile = "locked"
''')
    tokens = (f'{{ name = "lane", token = "{NARROW}" }}, {{ name = "zeta", token = "{HIDDEN}" }}, '
              f'{{ name = "root", token = "{ROOT_TOKEN}" }}')
    return write_config(tmp, body, hub=f"[hub.http]\nauth_tokens = [{tokens}]\n")


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _views(hub: HttpHub, token: str) -> tuple[str, str]:
    """The caller's /status.json (as text) and /metrics."""
    async with httpx2.AsyncClient(timeout=30, headers=_auth(token)) as http:
        status = await http.get(f"{hub.base}/status.json")
        metrics = await http.get(f"{hub.base}/metrics")
    assert status.status_code == 200 and metrics.status_code == 200
    return status.text, metrics.text


async def _calls(hub: HttpHub) -> None:
    """Each identity calls its own server's tools once (and the hidden one tries the other)."""
    async with http_session(hub.mcp_url, headers=_auth(HIDDEN)) as session:
        assert not (await session.call_tool("vault_echo", {"text": "x"})).is_error
        assert (await session.call_tool("vault_fail", {})).is_error
        with pytest.raises(MCPError):
            await session.call_tool("alpha_echo", {"text": "x"})
    async with http_session(hub.mcp_url, headers=_auth(NARROW)) as session:
        assert not (await session.call_tool("alpha_echo", {"text": "x"})).is_error


async def _hub_status(hub: HttpHub, token: str) -> str:
    """What the ``hub_status`` tool answers this caller."""
    async with http_session(hub.mcp_url, headers=_auth(token)) as session:
        result = await session.call_tool("hub_status", {})
    assert not result.is_error
    return json.dumps(result.structured_content)


async def test_a_narrow_identity_sees_only_its_servers_and_its_own_counters(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with http_hub(_config(tmp_path, admin=False), tmp_path) as hub:
            await _calls(hub)
            status_text, metrics = await _views(hub, NARROW)
            status = json.loads(status_text)
            for word in SECRET_WORDS:
                assert word not in status_text, f"{word!r} in the narrow /status.json"
                assert word not in metrics, f"{word!r} in the narrow /metrics"
            assert [u["name"] for u in status["upstreams"]] == ["alpha"]
            assert set(status["tools"]["by_toolset"]) == {"mcp-alpha", "hub"}
            assert {c["tool"] for c in status["recent_calls"]} == {"alpha_echo"}
            assert status["identities"] == {"token:lane": {"ok": 1}}
            assert "http_sessions" not in status and "replicas" not in status
            assert 'mcp_hub_identity_calls_total{identity="token:lane",status="ok"} 1' in metrics
            assert 'mcp_hub_upstream_up{server="alpha"} 1' in metrics
            assert 'tool="alpha_echo",server="alpha",status="ok"} 1' in metrics

            # The hub_status tool answers with the same view.
            answer = await _hub_status(hub, NARROW)
            assert "alpha_echo" in answer
            for word in SECRET_WORDS:
                assert word not in answer, f"{word!r} in the narrow hub_status"

            # The other narrow identity is just as blind to this one.
            other_text, other_metrics = await _views(hub, HIDDEN)
            assert "alpha" not in other_text and "lane" not in other_text
            assert "alpha" not in other_metrics and "lane" not in other_metrics

            # Reaching everything is not the full view: only an admin rule opens the others' counters.
            wide_text, wide_metrics = await _views(hub, ROOT_TOKEN)
            assert {u["name"] for u in json.loads(wide_text)["upstreams"]} == {"alpha", "vault"}
            assert "token:lane" not in wide_text + wide_metrics
            assert "token:zeta" not in wide_text + wide_metrics


async def test_an_admin_rule_sees_every_server_and_every_identity(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with http_hub(_config(tmp_path), tmp_path) as hub:
            await _calls(hub)
            full_text, full_metrics = await _views(hub, ROOT_TOKEN)
            full = json.loads(full_text)
            assert {u["name"] for u in full["upstreams"]} == {"alpha", "vault"}
            assert full["identities"]["token:zeta"] == {"error": 1, "ok": 1, "unknown": 1}
            assert full["identities"]["token:lane"] == {"ok": 1}
            assert "http_sessions" in full and "view" not in full
            assert 'identity="token:zeta",status="ok"} 1' in full_metrics
            assert 'identity="token:lane",status="ok"} 1' in full_metrics
            assert 'mcp_hub_upstream_up{server="vault"} 1' in full_metrics
            # The narrow identity is still narrow next to an admin.
            status_text, metrics = await _views(hub, NARROW)
            assert "vault" not in status_text + metrics and "zeta" not in status_text + metrics


def _series(metrics: str) -> set[str]:
    """Every sample line's name and labels (the value left out)."""
    return {line.rsplit(" ", 1)[0] for line in metrics.splitlines() if line and not line.startswith("#")}


async def test_made_up_tool_names_add_at_most_one_series(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("alpha"))
    made_up = [f"made_up_{i}_" + secrets.token_hex(2048) for i in range(60)]
    with anyio.fail_after(180):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as http:
            async with http_session(hub.mcp_url) as session:
                assert not (await session.call_tool("alpha_echo", {"text": "x"})).is_error
                before = _series((await http.get(f"{hub.base}/metrics")).text)
                for name in made_up:
                    with pytest.raises(MCPError, match="Unknown tool"):
                        await session.call_tool(name, {})
            metrics = (await http.get(f"{hub.base}/metrics")).text
            status = (await http.get(f"{hub.base}/status.json")).text
    added = _series(metrics) - before
    assert len(added) <= 1, f"{len(added)} new series"
    assert 'mcp_hub_tool_calls_total{tool="(unknown)",server="hub",status="unknown"} 60' in metrics
    assert not re.search(r"made_up_\d+_", metrics + status)


async def test_rejected_tools_do_not_name_a_server_the_identity_cannot_reach(tmp_path: Path) -> None:
    # vault comes later in the file and takes over alpha's tool names.
    body = (echo_server_toml("alpha", prefix="shared") + echo_server_toml("vault", prefix="shared") + '''
[profiles.small]
toolsets = ["mcp-alpha"]

[[access]]
match = "token:lane"
profile = "small"
''')
    config = write_config(tmp_path, body, hub=f'[hub.http]\nauth_tokens = [{{ name = "lane", token = "{NARROW}" }}]\n')
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub:
            status_text, metrics = await _views(hub, NARROW)
    status = json.loads(status_text)
    assert [u["name"] for u in status["upstreams"]] == ["alpha"]
    assert status["upstreams"][0]["rejected_tools"], "alpha's names are taken"
    assert status["rejected_tools"] and all(r["toolset"] == "mcp-alpha" for r in status["rejected_tools"])
    assert "vault" not in status_text and "vault" not in metrics
