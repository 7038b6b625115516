"""A per-user session reads an upstream's answers written as newline-delimited JSON.

Per-user sessions have an HTTP client of their own (``mcp_hub/upstream/peruser/
session.py``); it carries the same response hook as the shared connection's, so
a ``tools/call`` answered as one JSON message a line (the upstream
:mod:`tests.fixtures_upstream.ndjson_server` with ``NDJSON_CALLS=1``, taking ``initialize``) gives its
progress notifications and then its result.
"""

from __future__ import annotations

from collections.abc import Generator

import anyio
import httpx2
import pytest

from mcp_hub.config.model import ServerConfig
from mcp_hub.upstream.peruser.session import user_session
from tests.erastest import asking_over_http, text_of

pytestmark = pytest.mark.anyio

NDJSON = ["-m", "tests.fixtures_upstream.ndjson_server"]


class _NoAuth(httpx2.Auth):
    """Stands in for the user's OAuth provider: the fixture asks for no token."""

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        yield request


async def test_a_per_user_sessions_call_answered_as_ndjson_gives_its_progress_and_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NDJSON_CALLS", "1")
    monkeypatch.setenv("NDJSON_ANY_ERA", "1")  # a per-user session opens with initialize
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    with anyio.fail_after(60):
        async with asking_over_http(NDJSON, "nd") as block:
            url = block.split('url = "', 1)[1].split('"', 1)[0]
            config = ServerConfig(url=url, transport="http")
            async with user_session(config, _NoAuth(), init_seconds=30) as session:
                result = await session.call_tool("progress", {"steps": 2},
                                                 progress_callback=progress)
    assert text_of(result) == "done 2"
    assert seen == [1, 2]
