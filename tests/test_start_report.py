"""The first start says what it waits for: the servers it starts, each one still
starting with its last stderr line, then how many are ready (and which are not)."""

from __future__ import annotations

import logging

import anyio
import pytest

from tests.fixtures_upstream import echo_block, running

pytestmark = pytest.mark.anyio


class _Lines(logging.Handler):
    """Records ``mcp_hub.start`` and ``mcp_hub.upstream`` lines; ``summary`` is set by
    the last one, and every waiting line names its server."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.servers: list[str | None] = []
        self.summary = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.servers.append(getattr(record, "server", None))
        if record.getMessage().startswith("upstreams: "):
            self.summary.set()


async def test_the_first_start_names_what_it_waits_for_and_sums_up() -> None:
    lines = _Lines()
    logs = [logging.getLogger("mcp_hub.start"), logging.getLogger("mcp_hub.upstream")]
    old_levels = [log.level for log in logs]
    for log in logs:
        log.addHandler(lines)
        log.setLevel(logging.INFO)
    body = (echo_block("fast")
            + echo_block("slow", env={"ECHO_STARTUP_DELAY": "3"})
            + '[servers.ghost]\ncommand = "no-such-mcp-server-xyz"\n')
    try:
        with anyio.fail_after(60):
            async with running(body, progress_every=0.2):
                await lines.summary.wait()
    finally:
        for log, level in zip(logs, old_levels, strict=True):
            log.removeHandler(lines)
            log.setLevel(level)
    assert lines.lines[0] == "starting 3 upstream servers: fast, slow, ghost"
    waiting = [line for line in lines.lines if line.startswith("waiting for slow (")]
    assert waiting, lines.lines
    assert "; connecting)" in waiting[0]
    for line, server in zip(lines.lines, lines.servers, strict=True):
        if line.startswith("waiting for "):
            assert line.startswith(f"waiting for {server} (")
    # A server is no longer named once it is ready.
    ready_at = lines.lines.index("upstream fast: ready")
    assert not any(line.startswith("waiting for fast") for line in lines.lines[ready_at:])
    summary = next(line for line in lines.lines if line.startswith("upstreams: "))
    assert summary.startswith("upstreams: 2 of 3 ready, ")
    assert summary.endswith("; not ready: ghost (parked) (mcp-hub status shows why)")
