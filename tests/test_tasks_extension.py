"""The 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``) directly and through the hub.

The conformance suite's 0.2 line (``conformance-next``, 0.2.0-alpha.12) has ten
``tasks-*`` server scenarios: capability negotiation and per-request opt-in,
server-directed task creation with a flat ``CreateTaskResult``, ``tasks/get``
with the result inlined, ``tasks/update`` with ``inputResponses`` (one at a
time too), ``tasks/cancel`` acknowledgements, ``-32021`` for a client without
the extension, the removed ``tasks/result`` and ``tasks/list``, ``Mcp-Name``
routing headers, wire-field names, and an input round that becomes a task.
``tests/fixtures/tasks_server.py`` passes all of them directly; the hub, speaking
2026-07-28 to it over Streamable HTTP with ``prefix = ""``, must pass every one
too (its task ids and its routing in between).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from tests.conformance import run

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.node,
    pytest.mark.skipif(not run.suite_available(run.SUITE_JS_NEXT),
                       reason="conformance suite 0.2 not installed (make setup)"),
]

SCENARIOS = (
    "tasks-capability-negotiation", "tasks-dispatch-and-envelope", "tasks-lifecycle",
    "tasks-mrtr-composition", "tasks-mrtr-input", "tasks-request-headers",
    "tasks-request-state-removal", "tasks-required-task-error", "tasks-status-notifications",
    "tasks-wire-fields",
)


@asynccontextmanager
async def _fixture_and_hub(tmp_path: Path) -> AsyncIterator[tuple[str, str]]:
    port = run.free_port()
    fixture = [sys.executable, "-m", "tests.fixtures.tasks_server", "--transport", "http",
               "--port", str(port)]
    async with run.serve(fixture, port, expect_tool="greet") as direct:
        config = run.write_hub_config(tmp_path / "servers.toml", protocol="2026",
                                      upstream_url=direct)
        hub_port = run.free_port()
        hub = [*run.hub_command(), "serve", "--transport", "http", "--host", "127.0.0.1",
               "--port", str(hub_port), "--config", str(config)]
        async with run.serve(hub, hub_port, expect_tool="greet") as through:
            yield direct, through


async def test_every_tasks_scenario_passes_directly_and_through_the_hub(tmp_path: Path) -> None:
    results: dict[str, tuple[str, str]] = {}
    with anyio.fail_after(900):
        async with _fixture_and_hub(tmp_path) as (direct, through):
            for scenario in SCENARIOS:
                pair = []
                for url in (direct, through):
                    suite = await run.run_suite(url, scenario=scenario,
                                                suite_js=run.SUITE_JS_NEXT, timeout_s=300)
                    outcome = suite.scenarios[scenario]
                    pair.append(outcome.status if outcome.status == "pass"
                                else f"{outcome.status}: {outcome.reason}")
                results[scenario] = (pair[0], pair[1])
    not_passing = {s: r for s, r in results.items() if r != ("pass", "pass")}
    assert not not_passing, not_passing
