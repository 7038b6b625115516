"""A changed rewrite applies on hot reload with one ``list_changed``, without restarting the upstream.

A real hub over stdio (one stream, so the notifications arrive in order) on a
profile's endpoint, in front of the real SDK upstream, watching its config file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.hubtest import stdio_hub, write_config
from tests.rewrite_support import PROFILE, REWRITES, TRACKER, structured

pytestmark = pytest.mark.anyio

HUB = "watch_config = true\n"


def _write(tmp: Path, server_rules: str, profile_rules: str) -> Path:
    return write_config(tmp, TRACKER + server_rules + profile_rules, hub=HUB)


async def _texts(session: ClientSession) -> dict[str, str]:
    """Each listed tool's title and description."""
    return {t.name: f"{t.title}: {t.description}" for t in (await session.list_tools()).tools}


async def test_a_changed_rewrite_applies_on_reload_with_one_list_changed(tmp_path: Path) -> None:
    path = _write(tmp_path, REWRITES, PROFILE)
    notes: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notes[-1].set()
            notes.append(anyio.Event())

    async def until(session: ClientSession, name: str, wanted: str) -> None:
        while (await _texts(session)).get(name) != wanted:
            await notes[-1].wait()

    with anyio.fail_after(120):
        async with stdio_hub(path, "--profile", "support", message_handler=on_message) as s:
            assert "report_issue" in await _texts(s)
            before = len(notes)

            # A server-level change: a new title and a new fixed value.
            server = REWRITES.replace('fixed = "acme"', 'fixed = "globex"').replace(
                'title = "New issue"', 'title = "Create issue"')
            _write(tmp_path, server, PROFILE)
            await until(s, "report_issue", "Create issue: Open an issue for a customer report.")
            made = await s.call_tool("report_issue", {"repo": "web", "headline": "h"})
            assert structured(made)["owner"] == "globex"
            assert structured(made)["number"] == 1  # the same upstream process: not restarted

            # A profile-level change.
            _write(tmp_path, server, PROFILE.replace("for a customer report", "for a client"))
            await until(s, "report_issue", "Create issue: Open an issue for a client.")
            assert len(notes) - before == 2, "one list_changed per reload"
