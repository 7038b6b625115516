"""The echo fixture upstream behaves as its docstring says, over stdio, HTTP and SSE."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]


def _params(**env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.fixtures.echo_server"],
        cwd=str(ROOT),
        env={"PATH": os.environ.get("PATH", ""), **env},
    )


@asynccontextmanager
async def _stdio_session(**kwargs: Any) -> AsyncIterator[ClientSession]:
    env = kwargs.pop("env", {})
    async with (
        stdio_client(_params(**env)) as (read, write),
        ClientSession(read, write, **kwargs) as session,
    ):
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_basic_tools() -> None:
    with anyio.fail_after(30):
        async with _stdio_session() as session:
            init = session.initialize_result
            assert init is not None
            assert init.capabilities.tools is not None
            assert init.capabilities.tools.list_changed is True
            names = {t.name for t in (await session.list_tools()).tools}
            assert {
                "echo",
                "add",
                "slow",
                "fail",
                "crash",
                "big",
                "add_tool",
                "remove_tool",
                "sample",
                "elicit",
                "log",
                "env",
            } <= names
            assert _text(await session.call_tool("echo", {"text": "hi"})) == "hi"
            added = await session.call_tool("add", {"a": 2, "b": 3})
            assert added.structured_content == {"sum": 5}
            failed = await session.call_tool("fail", {})
            assert failed.is_error
            big = await session.call_tool("big", {"size": 12345})
            assert len(_text(big)) == 12345
            with pytest.raises(MCPError):
                await session.call_tool("nope", {})
            res = await session.read_resource("echo://hello")
            assert isinstance(res.contents[0], types.TextResourceContents)
            assert res.contents[0].text == "hello"
            prompt = await session.get_prompt("greet", {"name": "Ada"})
            assert isinstance(prompt.messages[0].content, types.TextContent)
            assert prompt.messages[0].content.text == "Hello, Ada!"


async def test_prefix_extra_tools_and_paging() -> None:
    env = {"ECHO_TOOL_PREFIX": "x_", "ECHO_EXTRA_TOOLS": "7", "ECHO_PAGE_SIZE": "5"}
    with anyio.fail_after(30):
        async with _stdio_session(env=env) as session:
            first = await session.list_tools()
            assert len(first.tools) == 5
            assert first.next_cursor is not None
            names = [t.name for t in first.tools]
            cursor = first.next_cursor
            while cursor:
                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
                names += [t.name for t in page.tools]
                cursor = page.next_cursor
            assert len(names) == 12 + 7
            assert all(n.startswith("x_") for n in names)
            assert _text(await session.call_tool("x_echo", {"text": "p"})) == "p"
            extra = await session.call_tool("x_extra_003", {"value": "v"})
            assert _text(extra) == 'extra_003: {"value": "v"}'


async def test_list_changed_progress_log_sampling_elicitation() -> None:
    changed = anyio.Event()
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[float] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_sample(
        ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        msg = params.messages[0].content
        assert isinstance(msg, types.TextContent)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=msg.text.upper()), model="m1"
        )

    async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "42"})

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    with anyio.fail_after(30):
        async with _stdio_session(
            message_handler=on_message,
            logging_callback=on_log,
            sampling_callback=on_sample,
            elicitation_callback=on_elicit,
        ) as session:
            await session.call_tool("add_tool", {"name": "dyn"})
            await changed.wait()
            assert "dyn" in {t.name for t in (await session.list_tools()).tools}
            assert _text(await session.call_tool("dyn", {"value": "z"})) == 'dyn: {"value": "z"}'
            changed = anyio.Event()
            await session.call_tool("remove_tool", {"name": "dyn"})
            await changed.wait()
            assert "dyn" not in {t.name for t in (await session.list_tools()).tools}

            done = await session.call_tool(
                "slow", {"seconds": 0.05, "steps": 3}, progress_callback=on_progress
            )
            assert _text(done) == "slept 0.05"
            assert progress == [1, 2, 3]

            logged = await session.call_tool("log", {"message": "m", "level": "warning"})
            assert _text(logged) == "logged"
            assert [(lg.level, lg.data) for lg in logs] == [("warning", "m")]

            sampled = await session.call_tool("sample", {"prompt": "abc"})
            assert _text(sampled) == "sampled[m1]: ABC"
            elicited = await session.call_tool("elicit", {"message": "q?"})
            assert _text(elicited) == '{"action": "accept", "content": {"answer": "42"}}'


async def test_slow_is_cancellable_and_crash_closes() -> None:
    with anyio.fail_after(30):
        async with _stdio_session() as session:
            with pytest.raises(MCPError):
                # The client times out and sends notifications/cancelled.
                await session.call_tool("slow", {"seconds": 600}, read_timeout_seconds=0.2)
            # The server still answers after the cancellation.
            assert _text(await session.call_tool("echo", {"text": "alive"})) == "alive"
            with pytest.raises(MCPError):
                await session.call_tool("crash", {})


async def test_exit_code_knob() -> None:
    with anyio.fail_after(30):
        proc = await anyio.run_process(
            [sys.executable, "-m", "tests.fixtures.echo_server"],
            cwd=ROOT,
            env={**os.environ, "ECHO_EXIT_CODE": "3"},
            check=False,
        )
    assert proc.returncode == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def _http_server(transport: str) -> AsyncIterator[int]:
    port = _free_port()
    cmd = [sys.executable, "-m", "tests.fixtures.echo_server", "--transport", transport]
    async with await anyio.open_process([*cmd, "--port", str(port)], cwd=ROOT) as proc:
        try:
            with anyio.fail_after(20):
                while True:  # poll until the port accepts connections
                    try:
                        stream = await anyio.connect_tcp("127.0.0.1", port)
                    except OSError:
                        assert proc.returncode is None, "echo server exited"
                        await anyio.sleep(0.05)
                    else:
                        await stream.aclose()
                        break
            yield port
        finally:
            proc.terminate()
            with anyio.fail_after(10):
                await proc.wait()


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_network_transports(transport: str) -> None:
    async with _http_server(transport) as port:
        with anyio.fail_after(30):
            if transport == "http":
                url = f"http://127.0.0.1:{port}/mcp"
                async with (
                    httpx2.AsyncClient() as http,
                    streamable_http_client(url, http_client=http) as streams,
                    ClientSession(streams[0], streams[1]) as session,
                ):
                    await session.initialize()
                    assert _text(await session.call_tool("echo", {"text": "h"})) == "h"
            else:
                async with (
                    sse_client(f"http://127.0.0.1:{port}/sse") as streams,
                    ClientSession(streams[0], streams[1]) as session,
                ):
                    await session.initialize()
                    assert _text(await session.call_tool("echo", {"text": "s"})) == "s"
