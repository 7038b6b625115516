"""Upstream failures: killed, hung, missing, crashing at startup; none affects the others."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import anyio
import pytest

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import ServerState
from tests.fixtures_upstream import (
    ProgressSeen,
    echo_block,
    is_state,
    kill_mid_call,
    running,
    script_block,
    text_of,
)

pytestmark = pytest.mark.anyio


async def test_kill_9_fails_the_call_at_once_and_the_server_comes_back() -> None:
    with anyio.fail_after(60):
        async with running(echo_block()) as (manager, registry):
            conn = manager.connection("echo")
            assert conn is not None
            # The call fails within 1 s of the kill.
            result, pid = await kill_mid_call(manager, registry, within=1)
            assert result.is_error
            assert "Server 'echo' connection was lost" in text_of(result)

            await manager.wait_until(lambda: "echo" not in registry)
            await manager.wait_until(is_state(manager, "echo", ServerState.READY))
            assert "echo" in registry
            assert conn.pid != pid
            status = manager.statuses()[0]
            assert status.reconnects >= 1
            again = await registry.dispatch("echo", {"text": "back"}, call=CallContext())
            assert text_of(again) == "back"


async def test_a_hung_call_times_out_while_other_servers_keep_answering() -> None:
    body = echo_block("hung", extra="timeout = 0.5") + echo_block("ok")
    with anyio.fail_after(60):
        async with running(body) as (_, registry):
            order: list[str] = []

            async def hung() -> None:
                result = await registry.dispatch("hung_slow", {"seconds": 60, "steps": 1},
                                                 call=CallContext())
                assert result.is_error
                assert text_of(result) == (
                    "Server 'hung' did not answer tool 'slow' within 0.5 s (timeout); "
                    "the call was cancelled upstream.")
                order.append("hung")

            async def ok() -> None:
                for i in range(5):
                    result = await registry.dispatch("ok_echo", {"text": str(i)},
                                                     call=CallContext())
                    assert text_of(result) == str(i)
                order.append("ok")

            async with anyio.create_task_group() as tg:
                tg.start_soon(hung)
                tg.start_soon(ok)
            assert order == ["ok", "hung"]
            # The hung server itself is still usable after the timeout.
            result = await registry.dispatch("hung_echo", {"text": "x"}, call=CallContext())
            assert text_of(result) == "x"


async def test_progress_resets_the_timeout_but_not_past_max_call_seconds() -> None:
    body = (echo_block("a", extra="timeout = 1.0")
            + echo_block("b", extra="timeout = 1.0\nmax_call_seconds = 1.5"))
    with anyio.fail_after(60):
        async with running(body) as (_, registry):
            call = ProgressSeen()
            done = await registry.dispatch("a_slow", {"seconds": 2.4, "steps": 12}, call=call)
            assert not done.is_error, text_of(done)
            assert call.reports == [float(i) for i in range(1, 13)]
            capped = await registry.dispatch("b_slow", {"seconds": 6, "steps": 30},
                                             call=CallContext())
            assert capped.is_error and "(timeout)" in text_of(capped)


async def test_a_missing_command_parks_the_server_and_the_rest_serve() -> None:
    body = "[servers.ghost]\ncommand = \"no-such-mcp-server-xyz\"\n" + echo_block()
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            statuses = {s.name: s for s in manager.statuses()}
            assert statuses["ghost"].state is ServerState.PARKED
            assert statuses["ghost"].last_error is not None
            assert "command not found: no-such-mcp-server-xyz" in statuses["ghost"].last_error
            assert statuses["echo"].state is ServerState.READY
            result = await registry.dispatch("echo", {"text": "fine"}, call=CallContext())
            assert text_of(result) == "fine"


async def test_a_server_that_exits_at_startup_reconnects_with_its_stderr_in_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="mcp_hub.upstream")
    body = echo_block("broken", env={"ECHO_EXIT_CODE": "3"})
    with anyio.fail_after(30):
        async with running(body) as (manager, _):
            status = manager.statuses()[0]
            assert status.state is ServerState.RECONNECTING
            assert status.last_error is not None
            assert "exiting with 3 as configured" in status.last_error
    stderr_lines = [r.getMessage() for r in caplog.records
                    if r.name == "mcp_hub.upstream.stderr"]
    assert "[broken] echo_server: exiting with 3 as configured" in stderr_lines


async def test_a_read_only_call_is_retried_once_after_a_reconnect(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    body = script_block("flaky", "flaky_server.py",
                        extra=f'env = {{ FLAKY_MARKER = "{marker}" }}')
    with anyio.fail_after(60):
        async with running(body) as (manager, registry):
            result = await registry.dispatch("flaky_lookup", {"n": 1}, call=CallContext())
            assert not result.is_error, text_of(result)
            assert text_of(result) == "ok 1"
            assert manager.statuses()[0].reconnects >= 1


async def test_a_call_that_is_not_read_only_is_not_retried(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    body = script_block("flaky", "flaky_server.py",
                        extra=f'env = {{ FLAKY_MARKER = "{marker}" }}')
    with anyio.fail_after(60):
        async with running(body) as (manager, registry):
            result = await registry.dispatch("flaky_write", {"n": 1}, call=CallContext())
            assert result.is_error
            assert "connection was lost" in text_of(result)
            conn = manager.connection("flaky")
            assert conn is not None
            await manager.wait_until(
                lambda: conn.reconnects >= 1 and conn.state is ServerState.READY)
            result = await registry.dispatch("flaky_write", {"n": 2}, call=CallContext())
            assert text_of(result) == "ok 2"


async def test_no_child_outlives_the_manager() -> None:
    with anyio.fail_after(30):
        async with running(echo_block("a") + echo_block("b")) as (manager, _):
            pids = [c.pid for c in (manager.connection("a"), manager.connection("b"))
                    if c is not None]
            assert all(pids) and len(pids) == 2
    for pid in pids:
        assert pid is not None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_the_child_gets_a_filtered_environment_plus_its_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCP_HUB_TEST_LEAK", "should-not-pass")
    body = echo_block(env={"GIVEN": "yes"})
    with anyio.fail_after(30):
        async with running(body) as (_, registry):
            leak = await registry.dispatch("echo_env", {"name": "MCP_HUB_TEST_LEAK"},
                                           call=CallContext())
            given = await registry.dispatch("echo_env", {"name": "GIVEN"}, call=CallContext())
            path = await registry.dispatch("echo_env", {"name": "PATH"}, call=CallContext())
            assert text_of(leak) == "<unset>"
            assert text_of(given) == "yes"
            # The hub's PATH (duplicates dropped), then the hub's own bin folder.
            entries = list(dict.fromkeys(e for e in os.environ["PATH"].split(os.pathsep) if e))
            hub_bin = os.path.join(sys.prefix, "bin")
            assert text_of(path) == os.pathsep.join(
                entries + ([] if hub_bin in entries else [hub_bin]))


async def test_an_answer_over_max_message_bytes_fails_at_once_and_the_session_goes_on() -> None:
    body = echo_block(extra="max_message_bytes = 100000")
    with anyio.fail_after(30):
        async with running(body) as (_, registry):
            result = await registry.dispatch("echo_big", {"size": 3_000_000}, call=CallContext())
            assert result.is_error
            assert "exceeds max_message_bytes" in text_of(result)
            fits = await registry.dispatch("echo_big", {"size": 90_000}, call=CallContext())
            assert len(text_of(fits)) == 90_000
            after = await registry.dispatch("echo", {"text": "after"}, call=CallContext())
            assert text_of(after) == "after"
