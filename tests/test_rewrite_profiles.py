"""A profile's tool rewrites, on top of the server's, for that profile's endpoints only.

Real hub (stdio ``--profile`` and HTTP ``/p/NAME/mcp``) in front of the real SDK
upstream (tests/fixtures_upstream/tracker_server.py), with the bridge on and off.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rewrite_support import PROFILE, call, client, config, definitions, structured, text

pytestmark = pytest.mark.anyio

MATRIX = [("stdio", False), ("stdio", True), ("http", False), ("http", True)]


@pytest.mark.parametrize(("transport", "bridge"), MATRIX)
async def test_a_profiles_rewrites_apply_on_top_of_the_servers_for_its_callers(
        tmp_path: Path, transport: str, bridge: bool) -> None:
    path = config(tmp_path, bridge=bridge, everything=False, extra=PROFILE)
    async with client(transport, path, tmp_path, profile="support") as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "tracker_new_issue" not in names and "tracker_received" not in names
        if bridge:
            found = await session.call_tool("tool_search", {"query": "customer report"})
            assert '"report_issue"' in text(found), text(found)
            assert "tracker_received" not in text(
                await session.call_tool("tool_search", {"query": "how many create calls arrived"}))
        else:
            assert "report_issue" in names
        issue = (await definitions(session, bridge, ["report_issue"]))["report_issue"]
        assert issue["description"] == "Open an issue for a customer report."
        assert issue["title"] == "New issue"  # the server's rewrite still applies
        assert list(issue["inputSchema"]["properties"]) == ["repo", "headline", "body"]

        made = await call(session, bridge, "report_issue", {"repo": "web", "headline": "Broken"})
        assert not made.is_error, text(made)
        assert structured(made) == {"owner": "acme", "repo": "web", "title": "Broken",
                                    "labels": ["customer"], "body": "", "number": 1}
        refused = await call(session, bridge, "report_issue",
                             {"repo": "web", "headline": "x", "labels": ["mine"]})
        assert refused.is_error and "labels" in text(refused)
        errors = {}
        for gone in ("tracker_new_issue", "tracker_received", "tracker_recieved"):
            with pytest.raises(Exception, match=f"Unknown tool: {gone}") as refused_call:
                await call(session, bridge, gone, {})
            errors[gone] = str(refused_call.value).replace(gone, "N")
        # Hidden, or no such tool: the same error, and the hidden name is never suggested.
        assert errors["tracker_received"] == errors["tracker_recieved"] == "Unknown tool: N"
        assert "tracker_new_issue" not in errors["tracker_new_issue"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_other_endpoints_see_only_the_servers_rewrites(tmp_path: Path, transport: str
                                                             ) -> None:
    path = config(tmp_path, everything=False, extra=PROFILE)
    async with client(transport, path, tmp_path) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"tracker_new_issue", "tracker_received"} <= names
        assert "report_issue" not in names
        made = await session.call_tool("tracker_new_issue",
                                       {"repo": "web", "summary": "s", "labels": ["mine"]})
        assert structured(made)["labels"] == ["mine"]
