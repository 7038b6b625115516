"""Tool rewriting end to end: a real hub (stdio and HTTP) in front of real upstreams.

The SDK server (tests/fixtures_upstream/tracker_server.py) answers with the arguments
it received; server-everything adds numbers. Each key of ``[servers.S.tools.T]``
is checked as the client sees it (tools/list, or tool_search/tool_describe/tool_call
when the bridge is on) and as the upstream receives it (docs/rewriting.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.erastest import hub_client
from tests.hubtest import EVERYTHING
from tests.rewrite_support import call, client, config, definitions, structured, text

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)"),
]

MATRIX = [("stdio", False), ("stdio", True), ("http", False), ("http", True)]


@pytest.mark.parametrize(("transport", "bridge"), MATRIX)
async def test_every_server_level_key_is_seen_by_the_client_and_undone_for_the_upstream(
        tmp_path: Path, transport: str, bridge: bool) -> None:
    async with client(transport, config(tmp_path, bridge=bridge), tmp_path) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "tracker_create_issue" not in names and "tracker_list_issues" not in names
        if bridge:
            assert "tool_search" in names and "tracker_new_issue" not in names
            found = await session.call_tool("tool_search", {"query": "open issue acme tracker"})
            assert '"tracker_new_issue"' in text(found)
            hidden = await session.call_tool("tool_search", {"query": "list open issues owner"})
            assert "tracker_list_issues" not in text(hidden)
        else:
            assert {"tracker_new_issue", "tracker_received", "ev_sum"} <= names
        defs = await definitions(session, bridge, ["tracker_new_issue", "ev_sum"])
        issue = defs["tracker_new_issue"]
        assert issue["title"] == "New issue"
        assert issue["description"] == "Open an issue in the acme tracker. Use for bugs only."
        assert issue["annotations"]["readOnlyHint"] is False
        assert issue["annotations"]["destructiveHint"] is False
        props = issue["inputSchema"]["properties"]
        assert list(props) == ["repo", "summary", "labels", "body"]
        assert props["summary"]["description"] == "One line, imperative."
        assert props["labels"]["default"] == ["triage"]
        assert sorted(issue["inputSchema"]["required"]) == ["repo", "summary"]
        # Structured output passes through: the upstream's outputSchema, unchanged.
        assert issue["outputSchema"]["title"] == "Issue"
        assert list(defs["ev_sum"]["inputSchema"]["properties"]) == ["x"]

        result = await call(session, bridge, "tracker_new_issue",
                            {"repo": "web", "summary": "Fix the login"})
        assert not result.is_error, text(result)
        assert structured(result) == {"owner": "acme", "repo": "web", "title": "Fix the login",
                                      "labels": ["triage"], "body": "", "number": 1}
        given = await call(session, bridge, "tracker_new_issue",
                           {"repo": "web", "summary": "Second", "labels": ["bug"]})
        assert structured(given)["labels"] == ["bug"]

        summed = await call(session, bridge, "ev_sum", {"x": 1.5})
        assert not summed.is_error, text(summed)
        assert "42" in text(summed)

        # Validation and coercion use the rewritten schema.
        missing = await call(session, bridge, "tracker_new_issue", {"repo": "web"})
        assert missing.is_error and "summary" in text(missing)
        coerced = await call(session, bridge, "ev_sum", {"x": "0.5"})
        assert "41" in text(coerced), text(coerced)

        # A hidden tool is refused exactly like one that does not exist.
        with pytest.raises(Exception) as hidden_call:
            await session.call_tool("tracker_list_issues", {"owner": "x"})
        with pytest.raises(Exception) as unknown_call:
            await session.call_tool("tracker_no_such_tool", {"owner": "x"})
        assert str(hidden_call.value).replace("tracker_list_issues", "N") == str(
            unknown_call.value).replace("tracker_no_such_tool", "N")


@pytest.mark.parametrize(("transport", "bridge"), MATRIX)
async def test_a_client_value_for_a_fixed_argument_is_refused_and_never_forwarded(
        tmp_path: Path, transport: str, bridge: bool) -> None:
    async with client(transport, config(tmp_path, bridge=bridge, everything=False),
                      tmp_path) as session:
        refused = await call(session, bridge, "tracker_new_issue",
                             {"repo": "web", "summary": "x", "owner": "evil"})
        assert refused.is_error
        assert "owner" in text(refused) and "set by the hub" in text(refused)
        old_name = await call(session, bridge, "tracker_new_issue",
                              {"repo": "web", "summary": "x", "title": "y"})
        assert old_name.is_error and "summary" in text(old_name)
        received = await call(session, bridge, "tracker_received", {})
        assert text(received) == "0"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_client_sees_and_calls_the_rewritten_tool_alike(tmp_path: Path,
                                                                     transport: str) -> None:
    """The 2026-07-28 era (discovery, no handshake) lists and calls the same rewritten tool."""
    path = config(tmp_path, everything=False)
    async with hub_client(transport, "auto", path, tmp_path) as c:
        listed = {t.name: t for t in (await c.list_tools()).tools}
        assert "tracker_create_issue" not in listed and "tracker_list_issues" not in listed
        issue = listed["tracker_new_issue"]
        assert issue.description == "Open an issue in the acme tracker. Use for bugs only."
        assert list(issue.input_schema["properties"]) == ["repo", "summary", "labels", "body"]
        made = await c.call_tool("tracker_new_issue", {"repo": "web", "summary": "Now"})
        assert structured(made) == {"owner": "acme", "repo": "web", "title": "Now",
                                    "labels": ["triage"], "body": "", "number": 1}
        refused = await c.call_tool("tracker_new_issue",
                                    {"repo": "web", "summary": "x", "owner": "evil"})
        assert refused.is_error and "set by the hub" in text(refused)
