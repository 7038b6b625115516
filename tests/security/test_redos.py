"""A catastrophic regex in ``search_files`` fails its own call, and the hub stays responsive.

``(a+)+$`` against a long line of ``a`` ending in ``!`` backtracks exponentially.
The pattern runs under the ``regex`` module's timeout, checked inside the match
and with the GIL released, so the call ends with a clear ``isError`` result
within its bound while ``/healthz`` keeps answering in well under 100 ms.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import types

from builtin_tools.file_tools import REGEX_TIMEOUT_SECONDS
from tests.hubtest import http_hub, http_session, write_config

pytestmark = pytest.mark.anyio


async def test_catastrophic_regex_fails_its_call_and_healthz_stays_fast(tmp_path: Path) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "long.txt").write_text("a" * 5000 + "!\n")
    config = write_config(tmp_path, f'[builtins.file]\nroots = ["{root}"]\n')
    latencies: list[float] = []
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub, http_session(hub.mcp_url) as session:
            done = anyio.Event()

            async def probe() -> None:
                async with httpx2.AsyncClient() as client:
                    await client.get(f"{hub.base}/healthz")  # warm the connection
                    while not done.is_set():
                        started = time.perf_counter()
                        r = await client.get(f"{hub.base}/healthz")
                        latencies.append(time.perf_counter() - started)
                        assert r.status_code == 200
                        await anyio.sleep(0.05)

            async with anyio.create_task_group() as tg:
                tg.start_soon(probe)
                started = time.perf_counter()
                result = await session.call_tool("search_files", {"content": "(a+)+$"})
                elapsed = time.perf_counter() - started
                done.set()
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    assert "catastrophic backtracking" in block.text and "long.txt" in block.text
    # The bound is CPU time; wall time on a shared machine is allowed a generous multiple.
    assert elapsed < REGEX_TIMEOUT_SECONDS * 15, elapsed
    assert len(latencies) >= 5, latencies
    assert max(latencies) < 0.100, sorted(latencies)[-5:]
