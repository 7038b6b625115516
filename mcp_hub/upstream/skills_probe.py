"""Whether a handshake-era (2025) upstream serves Agent Skills (``io.modelcontextprotocol/skills``).

A 2026-07-28 server declares the extension in ``capabilities.extensions``. A
2025 ``initialize`` answer has no such field (the SDK drops it on that wire), so a
server that serves skills says nothing about it there. When such an upstream
lists a ``skill://`` resource, the hub asks it ``skills/list`` once per session:
an answer with a ``skills`` list means it serves the extension; a directory read
(``resources/directory/read``) of the first listed skill's root that answers with
a ``resources`` list means it serves ``directoryRead`` too. Any error (unknown
method, timeout) means no. The result is kept on the connection
(:attr:`SkillsProbe.settings`) and read by :func:`mcp_hub.protocol.skills.skills_settings`.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp.types as types
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from mcp_hub.protocol.skills import SKILL_SCHEME, SKILLS_EXTENSION

__all__ = ["SkillsProbe"]

logger = logging.getLogger("mcp_hub.upstream")


class _Answer(BaseModel):
    """Any result, its members kept as sent."""

    model_config = ConfigDict(extra="allow")


class _Params(types.RequestParams):
    """Any params, sent as given."""

    model_config = ConfigDict(extra="allow")


class _Request(types.Request[_Params, str]):
    """A request of a method the SDK does not type."""

    method: str
    params: _Params


class SkillsProbe:
    """One connection's answer to "do you serve skills?", asked once per session."""

    def __init__(self) -> None:
        #: The extension settings found for the current session (None: not served).
        self.settings: dict[str, Any] | None = None
        self._asked: int | None = None

    async def check(self, session: ClientSession, modern: bool,
                    caps: types.ServerCapabilities | None, resources: list[types.Resource],
                    seconds: float) -> None:
        """Ask a 2025 session that lists ``skill://`` resources, once (bounded by ``seconds``)."""
        if id(session) == self._asked:
            return
        self._asked = id(session)
        self.settings = None
        if modern or (caps is not None and SKILLS_EXTENSION in (caps.extensions or {})):
            return
        if not any(str(r.uri).startswith(SKILL_SCHEME) for r in resources):
            return
        with anyio.move_on_after(seconds):
            listing = await _ask(session, "skills/list", {})
            if listing is None or not isinstance(listing.get("skills"), list):
                return
            self.settings = {}
            root = _first_root(listing["skills"])
            if root is not None:
                children = await _ask(session, "resources/directory/read", {"uri": root})
                if children is not None and isinstance(children.get("resources"), list):
                    self.settings = {"directoryRead": True}

    def forget(self) -> None:
        """The session ended: ask the next one again."""
        self.settings = None
        self._asked = None


async def _ask(session: ClientSession, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    try:
        answer = await session.send_request(_Request(method=method, params=_Params.model_validate(params)), _Answer)
        return dict(answer.model_extra or {})
    except (MCPError, ValueError) as exc:
        logger.debug("%s refused: %s", method, exc)
        return None


def _first_root(skills: list[Any]) -> str | None:
    """The root directory of the first listed skill whose URI ends in ``/SKILL.md``."""
    for entry in skills:
        uri = entry.get("uri") if isinstance(entry, dict) else None
        if isinstance(uri, str) and uri.endswith("/SKILL.md"):
            return uri[: -len("/SKILL.md")]
    return None
