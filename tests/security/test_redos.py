"""A catastrophic regex in ``search_files`` fails its own call, and the hub stays responsive.

``(a+)+$`` against a long line of ``a`` ending in ``!`` backtracks exponentially.
The pattern runs under the ``regex`` module's timeout, checked inside the match
and with the GIL released, so the call ends with a clear ``isError`` result
(without the timeout it would never end, and the test's bound would fail it)
while ``/healthz`` keeps answering: several health checks are answered while the
call is still running (a match holding the GIL or the event loop answers none).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import types

from tests.hubtest import http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

#: Health checks that must be answered while the catastrophic match runs.
ANSWERED_MEANWHILE = 5


async def test_catastrophic_regex_fails_its_call_and_healthz_stays_fast(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "long.txt").write_text("a" * 5000 + "!\n")
    config = write_config(tmp_path, f'[builtins.file]\nroots = ["{root}"]\n')
    answered_during_call = 0
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub, http_session(hub.mcp_url) as session:
            done = anyio.Event()
            warm = anyio.Event()

            async def probe() -> None:
                nonlocal answered_during_call
                async with httpx2.AsyncClient() as client:
                    await client.get(f"{hub.base}/healthz")  # warm the connection
                    warm.set()
                    while not done.is_set():
                        r = await client.get(f"{hub.base}/healthz")
                        assert r.status_code == 200
                        if not done.is_set():  # answered before the call's result arrived
                            answered_during_call += 1
                        await anyio.sleep(0.05)

            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                await warm.wait()
                result = await session.call_tool("search_files", {"content": "(a+)+$"})
                done.set()
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert "catastrophic backtracking" in block.text and "long.txt" in block.text
    assert answered_during_call >= ANSWERED_MEANWHILE, answered_during_call
