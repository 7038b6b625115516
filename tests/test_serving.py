"""A real client through the hub to real upstreams, on stdio, Streamable HTTP and SSE."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.hubtest import (
    PY,
    ROOT,
    dump,
    echo_server_toml,
    http_hub,
    http_session,
    sse_session,
    stdio_hub,
    write_config,
)

pytestmark = pytest.mark.anyio

TIME_TOML = f"""
[servers.time]
command = "{PY}"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
"""


def _config(tmp_path: Path, extra_hub: str = "") -> Path:
    return write_config(tmp_path, echo_server_toml("echo") + TIME_TOML, hub=extra_hub)


async def _direct_echo() -> Any:
    params = StdioServerParameters(command=PY, args=["-m", "tests.fixtures.echo_server"],
                                   cwd=str(ROOT), env={"PATH": os.environ["PATH"]})
    async with (stdio_client(params) as (r, w), ClientSession(r, w) as s):
        await s.initialize()
        return {
            "echo": dump(await s.call_tool("echo", {"text": "héllo"})),
            "add": dump(await s.call_tool("add", {"a": 2, "b": 40})),
            "fail": dump(await s.call_tool("fail", {"message": "nope"})),
        }


async def _check_merged(session: ClientSession, direct: Any) -> None:
    init = session.initialize_result
    assert init is not None
    caps = init.capabilities
    assert caps.tools is not None and caps.tools.list_changed is True
    assert caps.prompts is not None and caps.prompts.list_changed is True
    assert caps.resources is not None and caps.resources.list_changed is True
    names = {t.name for t in (await session.list_tools()).tools}
    assert {"echo_echo", "echo_add", "time_get_current_time", "time_convert_time"} <= names
    assert dump(await session.call_tool("echo_echo", {"text": "héllo"})) == direct["echo"]
    assert dump(await session.call_tool("echo_add", {"a": 2, "b": 40})) == direct["add"]
    assert dump(await session.call_tool("echo_fail", {"message": "nope"})) == direct["fail"]
    now = await session.call_tool("time_get_current_time", {"timezone": "Asia/Tokyo"})
    assert not now.is_error
    assert "Asia/Tokyo" in now.content[0].text  # type: ignore[union-attr]


async def test_stdio_client_lists_and_calls_tools_of_two_real_upstreams(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        direct = await _direct_echo()
        async with stdio_hub(_config(tmp_path)) as session:
            await _check_merged(session, direct)


async def test_http_and_sse_clients_list_and_call_tools_of_two_real_upstreams(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        direct = await _direct_echo()
        async with http_hub(_config(tmp_path), tmp_path) as hub:
            async with http_session(hub.mcp_url) as session:
                await _check_merged(session, direct)
            async with sse_session(f"{hub.base}/sse") as session:
                await _check_merged(session, direct)


async def test_unknown_tool_is_a_json_rpc_error_with_close_names(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_hub(_config(tmp_path)) as session:
            with pytest.raises(MCPError) as info:
                await session.call_tool("echo_ecko", {"text": "x"})
            assert info.value.error.code == types.INVALID_PARAMS
            assert "Unknown tool: echo_ecko" in info.value.error.message
            assert "echo_echo" in info.value.error.message


async def test_bad_arguments_are_an_error_result_naming_the_field(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with stdio_hub(_config(tmp_path)) as session:
            result = await session.call_tool("echo_add", {"a": "not a number", "b": 1})
            assert result.is_error
            assert "a" in result.content[0].text  # type: ignore[union-attr]


async def _collect_list_changed(
    session_factory: Any, url: str, trigger: Any
) -> tuple[set[str], int]:
    """Run ``trigger``, then re-list on each list_changed until the list moves.

    Notifications about earlier changes (the upstreams' initial registration) may
    still be in flight when the trigger runs, so one notification alone proves
    nothing: the test waits for one after which the new tool is listed.
    """
    got = anyio.Event()
    count = 0

    async def on_message(message: Any) -> None:
        nonlocal count
        if isinstance(message, types.ToolListChangedNotification):
            count += 1
            got.set()

    async with session_factory(url, message_handler=on_message) as session:
        before = {t.name for t in (await session.list_tools()).tools}
        await trigger(session)
        while True:
            await got.wait()
            got = anyio.Event()
            names = {t.name for t in (await session.list_tools()).tools}
            if names - before:
                return names, count


async def test_every_transport_receives_list_changed_when_an_upstream_adds_a_tool(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        async with http_hub(_config(tmp_path), tmp_path) as hub:
            for i, factory in enumerate((http_session, sse_session)):
                url = hub.mcp_url if factory is http_session else f"{hub.base}/sse"

                async def trigger(session: ClientSession, i: int = i) -> None:
                    await session.call_tool("echo_add_tool", {"name": f"fresh{i}"})

                names, _ = await _collect_list_changed(factory, url, trigger)
                assert f"echo_fresh{i}" in names

    with anyio.fail_after(60):

        async def trigger(session: ClientSession) -> None:
            await session.call_tool("echo_add_tool", {"name": "viastdio"})

        names, _ = await _collect_list_changed(stdio_session_of(_config(tmp_path)), "", trigger)
        assert "echo_viastdio" in names


def stdio_session_of(config: Path) -> Any:
    def factory(url: str, **kwargs: Any) -> Any:
        return stdio_hub(config, **kwargs)

    return factory


async def test_a_burst_of_upstream_changes_reaches_the_client_as_few_notifications(
    tmp_path: Path,
) -> None:
    notified = 0
    settled = anyio.Event()

    async def on_message(message: Any) -> None:
        nonlocal notified
        if isinstance(message, types.ToolListChangedNotification):
            notified += 1

    with anyio.fail_after(120):
        async with stdio_hub(_config(tmp_path), message_handler=on_message) as session:
            await session.list_tools()
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(session.call_tool, "echo_add_tool", {"name": f"burst{i:03d}"})
            # The burst's notification first: a list before it would already show the
            # new tools, and a client is told only of changes it has not seen.
            while notified == 0:
                await anyio.sleep(0.02)
            # Then wait until the hub's registry shows all 100 tools.
            while True:
                names = {t.name for t in (await session.list_tools()).tools}
                if all(f"echo_burst{i:03d}" in names for i in range(100)):
                    settled.set()
                    break
                await anyio.sleep(0.05)
            # One more change after the burst flushes anything still pending.
            marker = notified
            await session.call_tool("echo_add_tool", {"name": "after"})
            while notified == marker:
                await anyio.sleep(0.02)
    assert settled.is_set()
    assert 1 <= notified - 1 <= 5, notified


async def test_progress_reaches_the_client_and_cancel_reaches_the_upstream(tmp_path: Path) -> None:
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    with anyio.fail_after(60):
        async with stdio_hub(_config(tmp_path)) as session:
            result = await session.call_tool("echo_slow", {"seconds": 0.3, "steps": 3},
                                             progress_callback=on_progress)
            assert not result.is_error
            assert len(progress) >= 2
            # A cancelled call: the hub stays usable and answers the next call at once.
            with anyio.move_on_after(0.5):
                await session.call_tool("echo_slow", {"seconds": 30})
            again = await session.call_tool("echo_echo", {"text": "still here"})
            assert again.content[0].text == "still here"  # type: ignore[union-attr]


async def test_sampling_and_elicitation_are_answered_by_the_downstream_client(
    tmp_path: Path,
) -> None:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return types.CreateMessageResult(
            role="assistant", model="test-model",
            content=types.TextContent(type="text", text="sampled answer"),
        )

    async def elicitation(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"answer": "blue"})

    with anyio.fail_after(60):
        async with stdio_hub(_config(tmp_path), sampling_callback=sampling,
                             elicitation_callback=elicitation) as session:
            sampled = await session.call_tool("echo_sample", {"prompt": "hi"})
            assert not sampled.is_error
            assert "sampled answer" in str(dump(sampled))
            elicited = await session.call_tool("echo_elicit", {"message": "colour?"})
            assert not elicited.is_error
            assert "blue" in str(dump(elicited))


async def test_a_client_without_sampling_gets_a_completed_call_with_a_clear_error(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with stdio_hub(_config(tmp_path)) as session:
            sampled = await session.call_tool("echo_sample", {"prompt": "hi"})
            text = str(dump(sampled)).lower()
            assert "sampling" in text
            elicited = await session.call_tool("echo_elicit", {"message": "?"})
            assert "elicitation" in str(dump(elicited)).lower()


async def test_http_guards_refuse_missing_token_bad_origin_and_bad_host(tmp_path: Path) -> None:
    token = "tok-" + os.urandom(8).hex()
    config = write_config(tmp_path, echo_server_toml("echo"),
                          hub=f'[hub.http]\nauth_tokens = ["{token}"]\n')
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient() as client:
            r = await client.post(hub.mcp_url, json=body)
            assert r.status_code == 401
            assert r.headers["www-authenticate"].startswith("Bearer")
            r = await client.post(hub.mcp_url, json=body,
                                  headers={"Authorization": "Bearer wrong"})
            assert r.status_code == 401
            auth = {"Authorization": f"Bearer {token}"}
            r = await client.post(hub.mcp_url, json=body,
                                  headers={**auth, "Origin": "http://evil.example"})
            assert r.status_code == 403
            r = await client.post(hub.mcp_url, json=body,
                                  headers={**auth, "Host": "evil.example"})
            assert r.status_code == 421
            assert (await client.get(f"{hub.base}/healthz")).status_code == 200
            async with http_session(hub.mcp_url, headers=auth) as session:
                names = {t.name for t in (await session.list_tools()).tools}
                assert "echo_echo" in names
            metrics = (await client.get(f"{hub.base}/metrics", headers=auth)).text
            assert "mcp_hub_tool_calls_total" in metrics
        assert token not in hub.stderr()


async def test_two_stateless_hubs_serve_alternating_requests_of_one_client(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    with anyio.fail_after(90):
        async with (
            http_hub(config, tmp_path, "--stateless") as a,
            http_hub(config, tmp_path, "--stateless", "--log-level", "info") as b,
            httpx2.AsyncClient() as client,
        ):
            headers = {"Accept": "application/json, text/event-stream",
                       "MCP-Protocol-Version": "2025-06-18"}
            for i in range(6):
                hub = (a, b)[i % 2]
                r = await client.post(hub.mcp_url, headers=headers, json={
                    "jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "echo_echo", "arguments": {"text": f"msg{i}"}},
                })
                assert r.status_code == 200, r.text
                assert f"msg{i}" in r.text
                assert f'"id":{i}' in r.text.replace(" ", "")


def _pids_with(marker: str) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "environ").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.add(int(entry.name))
    return found


async def test_no_upstream_process_outlives_the_hub(tmp_path: Path) -> None:
    marker = f"MARK{os.getpid()}x{id(tmp_path)}"
    config = write_config(tmp_path, echo_server_toml("echo", env={"HUB_TEST_MARK": marker}))
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, http_session(hub.mcp_url) as session:
            await session.list_tools()
            assert _pids_with(marker), "the upstream should be running"
        while _pids_with(marker):
            await anyio.sleep(0.05)
