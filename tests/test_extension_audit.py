"""The audit trail and access rules cover the extensions' own requests.

Tool calls have always had their audit line; here the requests the extensions
add get theirs (``mcp_hub.downstream.extension_audit``): skills (against
:mod:`tests.fixtures.skills_server`), reads of ``skill://`` and ``ui://``
addresses, and ``tasks/*`` (against server-everything, marked ``node``), each
with the identity, the session, the target and the server its namespace names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

from tests.erastest import asking_over_http
from tests.hubtest import EVERYTHING, http_hub, write_config
from tests.test_everything import everything_http
from tests.test_skills import FIXTURE, PDF, rpc
from tests.test_tasks import _config, _until_done, http_task_client

pytestmark = pytest.mark.anyio

APPS = ["-m", "tests.fixtures_upstream.apps_server"]


def _requests(path: Path) -> list[dict[str, Any]]:
    """The ``request`` lines of the audit file."""
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("event") == "request"]


async def _lines(path: Path, last_target: str) -> list[dict[str, Any]]:
    """The request lines up to one for ``last_target`` (the writer thread appends them
    shortly after the request)."""
    with anyio.fail_after(20):
        while True:
            found = _requests(path)
            if any(line["target"] == last_target for line in found):
                return found
            await anyio.sleep(0.05)


async def test_skill_and_app_requests_are_audited_with_their_server(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with anyio.fail_after(120):
        async with asking_over_http([*FIXTURE, "--transport", "http", "--label", "beta"],
                                    name="beta") as beta, \
                asking_over_http([*APPS, "--label", "gamma"], name="gamma") as gamma:
            config = write_config(tmp_path, beta + gamma + f'\n[audit]\npath = "{audit}"\n')
            async with http_hub(config, tmp_path) as hub, \
                    Client(hub.mcp_url, mode="legacy") as client:
                await rpc(client, "skills/list")
                await rpc(client, "skills/get", {"uri": f"skill://beta/{PDF}"})
                await client.read_resource(f"skill://beta/{PDF}")
                await rpc(client, "resources/directory/read",
                          {"uri": "skill://beta/pdf-processing"})
                await client.read_resource("ui://gamma/app.html")
                with pytest.raises(MCPError):
                    await rpc(client, "skills/get", {"uri": "skill://nobody/x/SKILL.md"})
                await client.list_tools()  # not an extension request: no line
                lines = await _lines(audit, "skill://nobody/x/SKILL.md")
    seen = [(line["method"], line["target"], line["server"], line["outcome"]) for line in lines]
    assert seen == [
        ("skills/list", None, None, "ok"),
        ("skills/get", f"skill://beta/{PDF}", "beta", "ok"),
        ("resources/read", f"skill://beta/{PDF}", "beta", "ok"),
        ("resources/directory/read", "skill://beta/pdf-processing", "beta", "ok"),
        ("resources/read", "ui://gamma/app.html", "gamma", "ok"),
        ("skills/get", "skill://nobody/x/SKILL.md", "nobody", "error"),
    ]
    assert all(isinstance(line["session"], str) and line["duration_ms"] >= 0 for line in lines)


@pytest.mark.node
@pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)")
async def test_task_requests_are_audited_with_their_server(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with anyio.fail_after(120):
        async with everything_http(tmp_path) as url:
            config = _config(tmp_path, url)
            config.write_text(config.read_text() + f'\n[audit]\npath = "{audit}"\n')
            async with http_hub(config, tmp_path) as hub, \
                    http_task_client(hub.mcp_url) as client:
                task_id = (await client.start("audited"))["taskId"]
                await client.rpc("tasks/list", {})
                await _until_done(client, task_id)
                with pytest.raises(MCPError):
                    await client.rpc("tasks/get", {"taskId": "ev/not-a-task"})
                lines = await _lines(audit, "ev/not-a-task")
                calls = [json.loads(x) for x in audit.read_text().splitlines()
                         if json.loads(x).get("event") == "call"]
    assert [(c["tool"], c["server"], c["outcome"]) for c in calls][:1] == [
        ("simulate-research-query", "ev", "ok")]
    methods = [(line["method"], line["target"], line["server"]) for line in lines]
    assert ("tasks/list", None, None) in methods
    assert ("tasks/get", task_id, "ev") in methods
    refused = [line for line in lines if line["target"] == "ev/not-a-task"]
    assert [(r["method"], r["outcome"]) for r in refused] == [("tasks/get", "error")]
