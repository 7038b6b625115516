"""Fault injection through a real hub process: dying, lying and flooding upstreams, many
clients, clients that walk away mid-call. Loopback only; every size and wait is bounded.

The load test runs at its full size (100 sessions × 100 calls, about 30 s on 2 cores)
in CI (``CI=true``) or with ``MCP_HUB_LOAD_FULL=1``; a local run defaults to 20 × 25.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest

from tests.hubtest import PY, ROOT, HttpHub, echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

LOAD_FULL = os.environ.get("MCP_HUB_LOAD_FULL") == "1" or os.environ.get("CI") == "true"


def hostile_toml(name: str = "h", *, timeout: float = 3, banner: bool = True) -> str:
    env = '\nenv = { HOSTILE_BANNER = "1" }' if banner else ""
    return (f'[servers.{name}]\ncommand = "{PY}"\nargs = ["-m", "tests.fixtures.hostile_server"]\n'
            f'cwd = "{ROOT}"\ntimeout = {timeout}{env}\n')


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def children(pid: int, needle: str) -> list[int]:
    """Child processes of ``pid`` whose command line contains ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == pid and needle in cmdline:
            found.append(int(entry.name))
    return found


async def hostile_stats(session: Any, tool: str = "h_stats") -> dict[str, int]:
    result = await session.call_tool(tool, {})
    return dict(json.loads(text_of(result)))


@asynccontextmanager
async def serving(tmp_path: Path, body: str, hub: str = "") -> AsyncIterator[HttpHub]:
    async with http_hub(write_config(tmp_path, body, hub=hub), tmp_path) as served:
        yield served
        assert served.proc.poll() is None, "the hub died:\n" + served.stderr()[-3000:]


async def status_json(base: str) -> dict[str, Any]:
    async with httpx2.AsyncClient() as client:
        response = await client.get(f"{base}/status.json")
        return dict(response.json())


async def metric(base: str, name: str) -> float:
    async with httpx2.AsyncClient() as client:
        body = (await client.get(f"{base}/metrics")).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", body, re.M)
    assert match, body
    return float(match.group(1))


# ---------------------------------------------------------------------------- dying upstream


async def test_an_upstream_killed_during_32_concurrent_calls_fails_each_within_a_second_and_returns(
        tmp_path: Path) -> None:
    tools_changed = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal tools_changed
        if isinstance(message, types.ToolListChangedNotification):
            tools_changed.set()

    with anyio.fail_after(90):
        async with serving(tmp_path, echo_server_toml()) as hub, \
                http_session(hub.mcp_url, message_handler=on_message) as s:
            (child,) = children(hub.proc.pid, "tests.fixtures.echo_server")
            started = [anyio.Event() for _ in range(32)]
            ended: list[tuple[float, types.CallToolResult]] = []

            async def one(i: int) -> None:
                async def progress(p: float, total: float | None, message: str | None) -> None:
                    started[i].set()

                result = await s.call_tool("echo_slow", {"seconds": 60, "steps": 600},
                                           progress_callback=progress)
                ended.append((anyio.current_time(), result))

            async with anyio.create_task_group() as tg:
                for i in range(32):
                    tg.start_soon(one, i)
                for event in started:  # every call is running upstream
                    await event.wait()
                os.kill(child, signal.SIGKILL)
                killed_at = anyio.current_time()
            assert len(ended) == 32
            latest = max(t for t, _ in ended) - killed_at
            assert latest <= 1.0, f"slowest call ended {latest:.3f} s after the kill"
            for _, result in ended:
                assert result.is_error
                assert "Server 'echo' connection was lost during the call to tool 'slow'" in \
                    text_of(result)

            # The server's tools left with it; the supervisor restarts it (backoff 1 s ± 20 %)
            # and the tools come back with a list_changed.
            while "echo_echo" not in {t.name for t in (await s.list_tools()).tools}:
                tools_changed = anyio.Event()
                await tools_changed.wait()
            again = await s.call_tool("echo_echo", {"text": "back"})
            assert text_of(again) == "back"
            (restarted,) = children(hub.proc.pid, "tests.fixtures.echo_server")
            assert restarted != child
            (up,) = (await status_json(hub.base))["upstreams"]
            assert up["state"] == "ready" and up["reconnects"] >= 1


# ---------------------------------------------------------------------------- lying upstream


async def test_garbage_on_stdout_is_skipped_and_the_call_still_answers(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml()) as hub, http_session(hub.mcp_url) as s:
            # The banner before the handshake did not prevent the connection either.
            result = await s.call_tool("h_garbage", {})
            assert not result.is_error and text_of(result) == "survived the garbage"
            assert text_of(await s.call_tool("h_ok", {"text": "still here"})) == "still here"
            assert "upstream wrote a non-JSON-RPC line to stdout" in hub.stderr()


async def test_a_response_with_a_wrong_id_ends_in_a_clear_timeout_not_a_hang(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=1)) as hub, http_session(hub.mcp_url) as s:
            result = await s.call_tool("h_wrong_id", {})
            assert result.is_error
            assert text_of(result) == ("Server 'h' did not answer tool 'wrong_id' within 1 s "
                                       "(timeout); the call was cancelled upstream.")
            assert text_of(await s.call_tool("h_ok", {"text": "next"})) == "next"


@pytest.mark.parametrize("tool", ["malformed", "no_result"])
async def test_a_malformed_response_ends_in_a_clear_error_and_the_hub_stays_up(
        tmp_path: Path, tool: str) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=1)) as hub, http_session(hub.mcp_url) as s:
            result = await s.call_tool(f"h_{tool}", {})
            assert result.is_error
            assert f"Server 'h' did not answer tool '{tool}'" in text_of(result)
            assert text_of(await s.call_tool("h_ok", {"text": "next"})) == "next"


async def test_a_100_mb_result_is_refused_or_capped_quickly_and_memory_stays_bounded(
        tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with serving(tmp_path, hostile_toml(timeout=20)) as hub, \
                http_session(hub.mcp_url) as s:
            await s.call_tool("h_ok", {"text": "warm"})
            before = memory_kb(hub.proc.pid)
            result = await s.call_tool("h_huge", {"mb": 100})
            text = text_of(result)
            if result.is_error:  # refused for its size, at once: not a timeout
                assert "did not answer" not in text, text
            else:
                assert len(text) <= 110_000  # max_result_size_chars plus the marker
            with anyio.fail_after(2):  # the connection is not jammed behind the big line
                assert text_of(await s.call_tool("h_ok", {"text": "after"})) == "after"
            after = memory_kb(hub.proc.pid)
            grown_mb = (after["VmRSS"] - before["VmRSS"]) / 1024
            peak_mb = (after["VmHWM"] - before["VmRSS"]) / 1024
            print(f"hub RSS {before['VmRSS'] // 1024} MB before, {after['VmRSS'] // 1024} MB "
                  f"after, peak +{peak_mb:.0f} MB")
            assert grown_mb < 64
            assert peak_mb < 512


async def test_a_10_mb_result_is_capped_for_the_caller(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=20)) as hub, \
                http_session(hub.mcp_url) as s:
            before = memory_kb(hub.proc.pid)
            result = await s.call_tool("h_huge", {"mb": 10})
            text = text_of(result)
            assert not result.is_error and len(text) <= 110_000
            after = memory_kb(hub.proc.pid)
            print(f"hub RSS {before['VmRSS'] // 1024} MB before, {after['VmRSS'] // 1024} MB "
                  f"after, peak {after['VmHWM'] // 1024} MB")
            assert (after["VmRSS"] - before["VmRSS"]) / 1024 < 64
            assert text_of(await s.call_tool("h_ok", {"text": "after"})) == "after"


# ---------------------------------------------------------------------------- flooding upstream


async def test_a_list_changed_flood_is_coalesced_and_ends_with_the_right_tools(tmp_path: Path) -> None:
    notified = 0
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal notified, changed
        if isinstance(message, types.ToolListChangedNotification):
            notified += 1
            changed.set()

    with anyio.fail_after(90):
        async with serving(tmp_path, hostile_toml(timeout=30)) as hub, \
                http_session(hub.mcp_url, message_handler=on_message) as s:
            await s.list_tools()
            lists_before = (await hostile_stats(s))["list_calls"]
            sent_before = await metric(hub.base, 'mcp_hub_list_changed_total{kind="tools"}')
            started = anyio.current_time()
            result = await s.call_tool("h_flood", {"count": 1000, "rate": 1000})
            flood_seconds = anyio.current_time() - started
            assert text_of(result) == "sent 1000"
            while True:
                names = {t.name for t in (await s.list_tools()).tools}
                dynamic = {n for n in names if n.startswith("h_gen_")}
                if dynamic == {"h_gen_999"}:
                    break
                changed = anyio.Event()
                await changed.wait()
            assert {"h_ok", "h_flood", "h_stats"} <= names
            refreshes = (await hostile_stats(s))["list_calls"] - lists_before
            sent = await metric(hub.base, 'mcp_hub_list_changed_total{kind="tools"}') - sent_before
            print(f"flood of 1000 in {flood_seconds:.2f} s: {refreshes} upstream re-lists, "
                  f"{sent:.0f} downstream list_changed broadcasts, {notified} received")
            budget = 10 + 60 * flood_seconds  # ≤ one per debounce window, with slack
            assert 1 <= refreshes <= budget
            assert 1 <= sent <= budget
            assert 1 <= notified <= budget


# ---------------------------------------------------------------------------- many clients


async def test_many_concurrent_sessions_get_every_response_and_only_their_own(tmp_path: Path) -> None:
    sessions, calls = (100, 100) if LOAD_FULL else (20, 25)
    answers: dict[int, int] = {}
    mismatched: list[str] = []

    async def client(hub: HttpHub, n: int) -> None:
        async with http_session(hub.mcp_url) as s:
            got = 0
            for i in range(calls):
                text = f"s{n}-c{i}"
                result = await s.call_tool("echo_echo", {"text": text})
                if result.is_error or text_of(result) != text:
                    mismatched.append(f"{text} → {text_of(result)!r}")
                else:
                    got += 1
            answers[n] = got

    with anyio.fail_after(600 if LOAD_FULL else 120):
        async with serving(tmp_path, echo_server_toml(),
                           hub="[hub.http]\nmax_sessions = 1000\nmax_connections_per_ip = 1000\n") as hub:
            started = anyio.current_time()
            async with anyio.create_task_group() as tg:
                for n in range(sessions):
                    tg.start_soon(client, hub, n)
            elapsed = anyio.current_time() - started
            print(f"{sessions} sessions × {calls} calls in {elapsed:.1f} s "
                  f"({sessions * calls / elapsed:.0f} calls/s)")
    assert mismatched == []
    assert answers == dict.fromkeys(range(sessions), calls)


# ---------------------------------------------------------------------------- walking away


async def wait_for(predicate: Any) -> None:
    """Poll an external condition (another process's state) until it holds."""
    while not await predicate():
        await anyio.sleep(0.05)


HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def raw_session(url: str) -> dict[str, str]:
    """Open a Streamable HTTP session by hand; the headers that address it."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    headers = dict(HEADERS)
    async with httpx2.AsyncClient(timeout=10) as http:
        response = await http.post(url, json=init, headers=headers)
        headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
        await http.post(url, headers=headers,
                        json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


# With a progress token the call keeps its SSE stream (the fast path answers plain calls
# with one JSON body at the end).
HANG = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "h_hang", "arguments": {"seconds": 60}, "_meta": {"progressToken": "h2"}}}


async def upstream_hangs(observer: Any, count: int = 1) -> None:
    async def hanging() -> bool:
        return (await hostile_stats(observer))["in_progress"] == count

    await wait_for(hanging)


async def upstream_cancelled(observer: Any, count: int = 1) -> None:
    async def cancelled() -> bool:
        stats = await hostile_stats(observer)
        return stats["in_progress"] == 0 and stats["cancelled"] == count

    await wait_for(cancelled)


async def sessions_back_to(base: str, count: int) -> None:
    async def back() -> bool:
        return (await status_json(base))["hub"]["sessions"] == count

    await wait_for(back)


async def test_a_client_that_cancels_its_call_cancels_the_upstream_call(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=120)) as hub, \
                http_session(hub.mcp_url) as s:
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.call_tool, "h_hang", {"seconds": 60})
                await upstream_hangs(s)
                tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
            with anyio.fail_after(5):
                await upstream_cancelled(s)
            assert text_of(await s.call_tool("h_ok", {"text": "fine"})) == "fine"


async def test_a_client_that_ends_its_session_mid_call_cancels_the_upstream_call_and_counts_return(
        tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=120)) as hub, \
                http_session(hub.mcp_url) as observer:
            await observer.call_tool("h_ok", {"text": "tracked"})  # the observer is counted
            baseline_sessions = (await status_json(hub.base))["hub"]["sessions"]
            baseline_metric = await metric(hub.base, "mcp_hub_sessions")
            headers = await raw_session(hub.mcp_url)
            async with httpx2.AsyncClient(timeout=10) as http, anyio.create_task_group() as tg:
                async def call() -> None:
                    async with http.stream("POST", hub.mcp_url, json=HANG, headers=headers) as r:
                        async for _ in r.aiter_bytes():
                            pass

                tg.start_soon(call)
                await upstream_hangs(observer)
                assert (await status_json(hub.base))["hub"]["sessions"] == baseline_sessions + 1
                response = await http.delete(hub.mcp_url, headers=headers)
                assert response.status_code in (200, 204)
                tg.cancel_scope.cancel()
            with anyio.fail_after(5):
                await upstream_cancelled(observer)
                await sessions_back_to(hub.base, baseline_sessions)
            assert await metric(hub.base, "mcp_hub_sessions") == baseline_metric
            assert text_of(await observer.call_tool("h_ok", {"text": "fine"})) == "fine"


async def test_a_connection_dropped_mid_call_is_reaped_at_the_idle_timeout_and_cancelled_upstream(
        tmp_path: Path) -> None:
    """No DELETE and no notifications/cancelled: the spec says a dropped stream is not a
    cancellation (the client may resume), so the session lives until it is idle too long."""
    with anyio.fail_after(60):
        async with serving(tmp_path, hostile_toml(timeout=120),
                           hub="[hub.http]\nsession_idle_timeout = 2\n") as hub, \
                http_session(hub.mcp_url) as observer:
            await observer.call_tool("h_ok", {"text": "tracked"})
            baseline_sessions = (await status_json(hub.base))["hub"]["sessions"]
            headers = await raw_session(hub.mcp_url)
            async with httpx2.AsyncClient(timeout=10) as http, \
                    http.stream("POST", hub.mcp_url, json=HANG, headers=headers):
                await upstream_hangs(observer)
            # The stream and its connection are closed now.
            with anyio.fail_after(10):
                await upstream_cancelled(observer)
                await sessions_back_to(hub.base, baseline_sessions)
