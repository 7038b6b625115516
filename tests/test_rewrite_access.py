"""A profile's tool rewrites follow the caller's profile, however the caller got it.

Real hubs over HTTP with named static tokens and ``[[access]]`` rules, in front of
the real SDK upstream (tests/fixtures_upstream/tracker_server.py): an identity the
rules map to a profile gets that profile's rewrites on ``/mcp`` exactly as the
profile's endpoint shows them (listing, ``tool_search``/``tool_describe``,
calls, and the tools digest that decides who hears ``list_changed``), while an
identity mapped to no profile sees the server-level rewrite only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.hubtest import http_hub, http_session, write_config
from tests.rewrite_support import PROFILE, REWRITES, TRACKER, call, definitions, structured, text

pytestmark = pytest.mark.anyio

AGENT = "agent-token-0123456789abcdef"
DEV = "dev-token-0123456789abcdefgh"

RULES = """
[[access]]
match = "token:agent"
profile = "support"

[[access]]
match = "token:dev"
"""


def _config(tmp: Path, *, bridge: bool = False, server: str = REWRITES,
            profile: str = PROFILE, extra: str = "") -> Path:
    tokens = f'{{ name = "agent", token = "{AGENT}" }}, {{ name = "dev", token = "{DEV}" }}'
    hub = f"watch_config = true\n[hub.http]\nauth_tokens = [{tokens}]\n"
    body = (TRACKER + server + profile + extra + RULES
            + f'\n[tool_search]\nmode = "{"on" if bridge else "off"}"\n')
    return write_config(tmp, body, hub=hub)


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("bridge", [False, True])
async def test_an_identity_mapped_to_a_profile_gets_its_rewrites_on_the_main_endpoint(
        tmp_path: Path, bridge: bool) -> None:
    with anyio.fail_after(120):
        async with (http_hub(_config(tmp_path, bridge=bridge), tmp_path) as hub,
                    http_session(hub.mcp_url, headers=_auth(AGENT)) as agent):
            names = {t.name for t in (await agent.list_tools()).tools}
            assert "tracker_new_issue" not in names and "tracker_received" not in names
            if bridge:
                found = await agent.call_tool("tool_search", {"query": "customer report"})
                assert '"report_issue"' in text(found), text(found)
                assert "tracker_received" not in text(await agent.call_tool(
                    "tool_search", {"query": "how many create calls arrived"}))
            else:
                assert "report_issue" in names
            issue = (await definitions(agent, bridge, ["report_issue"]))["report_issue"]
            assert issue["description"] == "Open an issue for a customer report."
            assert list(issue["inputSchema"]["properties"]) == ["repo", "headline", "body"]

            made = await call(agent, bridge, "report_issue", {"repo": "web", "headline": "Broken"})
            assert not made.is_error, text(made)
            assert structured(made) == {"owner": "acme", "repo": "web", "title": "Broken",
                                        "labels": ["customer"], "body": "", "number": 1}
            refused = await call(agent, bridge, "report_issue",
                                 {"repo": "web", "headline": "x", "labels": ["mine"]})
            assert refused.is_error and "labels" in text(refused)
            for gone in ("tracker_new_issue", "tracker_received"):
                with pytest.raises(Exception, match=f"Unknown tool: {gone}"):
                    await call(agent, bridge, gone, {})

            async with http_session(hub.mcp_url, headers=_auth(DEV)) as dev:
                names = {t.name for t in (await dev.list_tools()).tools}
                if not bridge:
                    assert {"tracker_new_issue", "tracker_received"} <= names
                    assert "report_issue" not in names
                made = await call(dev, bridge, "tracker_new_issue",
                                  {"repo": "web", "summary": "s", "labels": ["mine"]})
                assert structured(made)["labels"] == ["mine"]


async def test_a_changed_profile_rewrite_wakes_only_the_identities_mapped_to_it(
        tmp_path: Path) -> None:
    heard: dict[str, list[anyio.Event]] = {"agent": [anyio.Event()], "dev": [anyio.Event()]}

    def handler(who: str) -> Any:
        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                heard[who][-1].set()
                heard[who].append(anyio.Event())
        return on_message

    async def texts(session: ClientSession) -> dict[str, str]:
        return {t.name: f"{t.title}: {t.description}" for t in (await session.list_tools()).tools}

    with anyio.fail_after(120):
        async with (
            http_hub(_config(tmp_path), tmp_path) as hub,
            http_session(hub.mcp_url, headers=_auth(AGENT), message_handler=handler("agent")) as agent,
            http_session(hub.mcp_url, headers=_auth(DEV), message_handler=handler("dev")) as dev,
        ):
            assert "report_issue" in await texts(agent)
            assert "tracker_new_issue" in await texts(dev)
            # Only the profile's own rewrite changes: the agent hears of it, dev does not.
            _config(tmp_path, profile=PROFILE.replace("for a customer report", "for a client"))
            await heard["agent"][0].wait()
            assert (await texts(agent))["report_issue"] == "New issue: Open an issue for a client."
            # Then a change both see: the first notification dev hears is this one.
            _config(tmp_path, server=REWRITES.replace('title = "New issue"',
                                                      'title = "Create issue"'),
                    profile=PROFILE.replace("for a customer report", "for a client"))
            await heard["dev"][0].wait()
            assert len(heard["dev"]) == 2
            assert (await texts(dev))["tracker_new_issue"].startswith("Create issue: ")


TRIAGE = "triage-token-0123456789abcdef"

#: Profiles whose toolsets name tools as the profile shows them, and a second copy of
#: the tracker whose include/exclude name tools (the upstream's own names).
BY_PROFILE_NAME = f"""
[profiles.triage]
toolsets = ["picked"]

[profiles.triage.tools.tracker_new_issue]
name = "file_issue"

[toolsets.picked]
tools = ["file_issue"]

[profiles.narrow]
disabled_toolsets = ["dropped"]

[profiles.narrow.tools.tracker_received]
name = "count_received"

[toolsets.dropped]
tools = ["count_received"]

{TRACKER.replace("[servers.tracker]", "[servers.copy]")}
include = ["create_issue", "received"]
exclude = ["copy_count", "count"]

[servers.copy.tools.received]
name = "count"

[[access]]
match = "token:triage"
profile = "triage"
"""


async def test_toolsets_reach_a_tool_by_the_name_its_profile_shows(tmp_path: Path) -> None:
    tokens = (f'{{ name = "triage", token = "{TRIAGE}" }}, {{ name = "dev", token = "{DEV}" }}, '
              f'{{ name = "agent", token = "{AGENT}" }}')
    path = write_config(tmp_path, TRACKER + REWRITES + PROFILE + BY_PROFILE_NAME + RULES,
                        hub=f"[hub.http]\nauth_tokens = [{tokens}]\n")
    with anyio.fail_after(120):
        async with http_hub(path, tmp_path) as hub:
            # An identity mapped to a profile whose toolset lists the profile's own name.
            async with http_session(hub.mcp_url, headers=_auth(TRIAGE)) as triage:
                assert [t.name for t in (await triage.list_tools()).tools] == ["file_issue"]
                made = await triage.call_tool("file_issue", {"repo": "web", "summary": "s"})
                assert not made.is_error, text(made)
                assert structured(made)["owner"] == "acme"
                with pytest.raises(Exception, match="Unknown tool: tracker_new_issue"):
                    await triage.call_tool("tracker_new_issue", {"repo": "web", "summary": "s"})
            # A profile endpoint whose disabled toolset lists the profile's own name.
            async with http_session(f"{hub.base}/p/narrow/mcp", headers=_auth(DEV)) as narrow:
                names = {t.name for t in (await narrow.list_tools()).tools}
                assert "tracker_new_issue" in names
                assert not names & {"count_received", "tracker_received"}
                with pytest.raises(Exception, match="Unknown tool: count_received"):
                    await narrow.call_tool("count_received", {})
                # include/exclude name the upstream's own tools, before any rename.
                assert {n for n in names if n.startswith("copy_")} == {"copy_create_issue",
                                                                        "copy_count"}
            # An identity mapped to support on triage's endpoint: triage's reach and rules,
            # support's on top (its name and its fixed labels win).
            async with http_session(f"{hub.base}/p/triage/mcp", headers=_auth(AGENT)) as both:
                assert [t.name for t in (await both.list_tools()).tools] == ["report_issue"]
                made = await both.call_tool("report_issue", {"repo": "web", "headline": "h"})
                assert structured(made)["labels"] == ["customer"], text(made)
                with pytest.raises(Exception, match="Unknown tool: file_issue"):
                    await both.call_tool("file_issue", {"repo": "web", "summary": "s"})
