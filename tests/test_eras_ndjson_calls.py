"""An upstream that answers its calls as newline-delimited JSON.

The upstream (:mod:`tests.fixtures_upstream.ndjson_server` with
``NDJSON_CALLS=1``) answers a ``tools/call`` under ``Content-Type:
application/json`` with one message a line: its progress notifications, a line
that is not JSON, then the result. Through the hub, the client hears every
progress notification before the result, the result's content is intact, and
the line that is not JSON is logged under the server's name and skipped.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client

from tests.erastest import CALLBACKS, asking_over_http, text_of
from tests.hubtest import http_hub, write_config

pytestmark = pytest.mark.anyio

NDJSON = ["-m", "tests.fixtures_upstream.ndjson_server"]
BLOCK = 'protocol = "2026"\n'


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_calls_progress_and_result_written_as_ndjson_reach_the_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str,
) -> None:
    monkeypatch.setenv("NDJSON_CALLS", "1")
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    with anyio.fail_after(90):
        async with asking_over_http(NDJSON, "nd", BLOCK) as block:
            config = write_config(tmp_path, block)
            async with http_hub(config, tmp_path) as hub, \
                    Client(hub.mcp_url, mode=mode, **CALLBACKS) as client:
                result = await client.call_tool("nd_progress", {"steps": 3},
                                                progress_callback=progress)
            log = hub.stderr_path.read_text()
    assert not result.is_error and text_of(result) == "done 3"
    assert seen == [(1, "step 1"), (2, "step 2"), (3, "step 3")]
    assert "[nd] upstream sent a line that is not JSON on its answer to tools/call" in log
    assert "this line is not JSON" in log
    assert "Error parsing JSON response" not in log
