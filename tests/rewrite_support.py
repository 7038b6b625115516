"""Configs and helpers shared by the tool-rewriting tests (docs/rewriting.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession

from tests.hubtest import EVERYTHING, PY, ROOT, http_hub, http_session, stdio_hub, write_config

TRACKER = (f'[servers.tracker]\ncommand = "{PY}"\n'
           'args = ["-m", "tests.fixtures_upstream.tracker_server"]\n'
           f'cwd = "{ROOT}"\n')

#: The rewrites every end-to-end test starts from: one of each key on the SDK server,
#: a rename and a fixed number on server-everything.
REWRITES = """
[servers.tracker.tools.create_issue]
name = "new_issue"
title = "New issue"
description = "Open an issue in the acme tracker. Use for bugs only."
annotations = { readOnlyHint = false, destructiveHint = false }

[servers.tracker.tools.create_issue.arguments.owner]
fixed = "acme"

[servers.tracker.tools.create_issue.arguments.title]
rename = "summary"
description = "One line, imperative."

[servers.tracker.tools.create_issue.arguments.labels]
default = ["triage"]

[servers.tracker.tools.list_issues]
hide = true
"""

EVERYTHING_REWRITES = f"""
[servers.ev]
command = "{EVERYTHING}"
args = ["stdio"]

[servers.ev.tools.get-sum]
name = "sum"
description = "Add x to the hub's constant."

[servers.ev.tools.get-sum.arguments.a]
rename = "x"

[servers.ev.tools.get-sum.arguments.b]
fixed = 40.5
"""


#: A profile's rewrites on top of the server's (keyed by the exposed name).
PROFILE = """
[profiles.support.tools.tracker_new_issue]
name = "report_issue"
description = "Open an issue for a customer report."
arguments.labels.fixed = ["customer"]
arguments.summary.rename = "headline"

[profiles.support.tools.tracker_received]
hide = true
"""


def config(tmp: Path, *, bridge: bool = False, extra: str = "", everything: bool = True) -> Path:
    body = TRACKER + REWRITES + (EVERYTHING_REWRITES if everything else "") + extra
    body += f'\n[tool_search]\nmode = "{"on" if bridge else "off"}"\n'
    return write_config(tmp, body)


@asynccontextmanager
async def client(transport: str, path: Path, tmp: Path, *, profile: str | None = None,
                 headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A client session of a hub run with ``path`` over ``transport`` ("stdio" or "http"),
    on ``profile``'s endpoint when given."""
    if transport == "stdio":
        async with stdio_hub(path, *(["--profile", profile] if profile else [])) as session:
            yield session
        return
    endpoint = f"/p/{profile}/mcp" if profile else "/mcp"
    async with http_hub(path, tmp) as hub, http_session(hub.base + endpoint,
                                                          headers=headers) as session:
        yield session


def text(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def call(session: ClientSession, bridge: bool, name: str, args: dict[str, Any]) -> Any:
    """Call ``name`` directly, or through ``tool_call`` when the bridge is on."""
    if not bridge:
        return await session.call_tool(name, args)
    return await session.call_tool("tool_call", {"name": name, "arguments": args})


def structured(result: Any) -> Any:
    """The structured output of a call, direct or through ``tool_call``."""
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(text(result))


async def definitions(session: ClientSession, bridge: bool, names: list[str]
                      ) -> dict[str, dict[str, Any]]:
    """The definitions of ``names`` as this client sees them (tools/list or tool_describe)."""
    if not bridge:
        listed = (await session.list_tools()).tools
        return {t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True)
                for t in listed if t.name in names}
    result = await session.call_tool("tool_describe", {"names": names})
    data = result.structured_content or json.loads(text(result))
    return {d["name"]: d for d in data.get("tools", [])}
