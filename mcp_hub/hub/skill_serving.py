"""The Hub's door for Agent Skills: ``skills/list``, ``skills/get``, ``resources/directory/read``.

The extension (``io.modelcontextprotocol/skills``, :mod:`mcp_hub.protocol.skills`) adds three
requests on top of resources. Each applies the caller's access policy and the
start-up wait, as every serving method does (:mod:`mcp_hub.hub.serving`):

* ``skills/list``: every upstream the caller may use that declares the extension
  is asked (each listing read to its end), its entries namespaced, and the
  whole answered as one page. An upstream that fails is left out (a partial
  listing is allowed) and named in the hub's log.
* ``skills/get`` and ``resources/directory/read``: routed by URI, exactly as a
  ``resources/read`` of the same URI would be (a ``skill://SERVER/…`` address
  goes to ``SERVER`` with its own address), with the caller's access to that
  resource checked first. A URI that names no server the caller may use, or a
  server that does not declare the extension (or, for a directory read,
  ``directoryRead``), gets ``-32602`` like a skill nobody serves; the upstream's
  own errors (an unknown skill, a path that is no directory) pass as they came.

:class:`SkillServing` is one of the Hub's parts (the Hub holds it as
``Hub.skill_serving`` and its serving methods hand these requests to it); it is
built from the access control, the upstream manager and the start-up gate, none
of which a reload replaces, and holds nothing of its own.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp import types
from mcp.shared.exceptions import MCPError

from mcp_hub.hub.access import AccessControl, Caller
from mcp_hub.hub.serving import reachable_upstreams
from mcp_hub.hub.startup import StartupGate
from mcp_hub.pipeline.context import CallContext
from mcp_hub.protocol.skills import (
    MAX_PAGES,
    merged_freshness,
    namespaced_children,
    namespaced_entry,
    skills_settings,
)

if TYPE_CHECKING:
    from mcp_hub.upstream import ServerConnection, UpstreamManager

__all__ = ["SkillServing"]

logger = logging.getLogger("mcp_hub.hub.core")


class SkillServing:
    """Skills requests of a transport (see the module docstring)."""

    def __init__(self, access: AccessControl, upstreams: UpstreamManager,
                 startup: StartupGate) -> None:
        self._access = access
        self._upstreams = upstreams
        self._startup = startup

    async def list_skills(self, caller: Caller, call: CallContext | None) -> dict[str, Any]:
        """``skills/list``: the skills of every upstream ``caller`` may use, namespaced."""
        await self._startup.wait_lists()
        skills: list[Any] = []
        answers: list[dict[str, Any]] = []
        for conn in reachable_upstreams(self._access, self._upstreams, caller):
            if conn.session is None or skills_settings(conn) is None:
                continue
            try:
                pages = await _all_pages(conn, call)
            except MCPError as exc:
                logger.warning("skills/list at %s failed: %s", conn.name, exc.message,
                               extra={"server": conn.name})
                continue
            for page in pages:
                answers.append(page)
                entries = page.get("skills")
                skills.extend(namespaced_entry(conn.name, e)
                              for e in (entries if isinstance(entries, list) else ()))
        return {"skills": skills, **merged_freshness(answers)}

    async def get_skill(self, caller: Caller, uri: str, call: CallContext | None
                        ) -> dict[str, Any]:
        """``skills/get``: the entry of skill ``uri`` from the server that serves it."""
        conn, own = await self._skill_owner(caller, uri, directory=False)
        answer = await conn.raw_request("skills/get", {"uri": own}, call)
        if "skill" in answer:
            answer["skill"] = namespaced_entry(conn.name, answer["skill"])
        return answer

    async def read_directory(self, caller: Caller, uri: str, cursor: str | None,
                             call: CallContext | None) -> dict[str, Any]:
        """``resources/directory/read``: the children of directory ``uri`` at its server."""
        conn, own = await self._skill_owner(caller, uri, directory=True)
        body: dict[str, Any] = {"uri": own}
        if cursor is not None:
            body["cursor"] = cursor
        answer = await conn.raw_request("resources/directory/read", body, call)
        if "resources" in answer:
            answer["resources"] = namespaced_children(conn.name, answer["resources"])
        return answer

    async def _skill_owner(self, caller: Caller, uri: str, *, directory: bool
                           ) -> tuple[ServerConnection, str]:
        """The connection a skills request about ``uri`` goes to, and the URI it names
        there; ``-32602`` when the caller may not read ``uri`` or no server serves it."""
        await self._startup.wait_lists()
        self._access.check_resource(caller, uri)
        server = self._upstreams.resource_server(uri)
        conn = self._upstreams.connection(server) if server is not None else None
        settings = skills_settings(conn) if conn is not None else None
        if conn is None or settings is None or (directory and settings.get("directoryRead") is not True):
            what = "directory resource" if directory else "skill"
            raise MCPError(types.INVALID_PARAMS, f"No {what} is served at {uri}", data={"uri": uri})
        return conn, self._upstreams.own_uri(conn, uri)


async def _all_pages(conn: ServerConnection, call: CallContext | None) -> list[dict[str, Any]]:
    """Every page of ``conn``'s ``skills/list`` (at most :data:`MAX_PAGES`)."""
    pages: list[dict[str, Any]] = []
    cursor: Any = None
    for _ in range(MAX_PAGES):
        page = await conn.raw_request("skills/list", {} if cursor is None else {"cursor": cursor},
                                      call)
        pages.append(page)
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            break
    return pages
