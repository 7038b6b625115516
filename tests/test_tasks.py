"""2025-11-25 tasks through the hub, against ``@modelcontextprotocol/server-everything``.

``simulate-research-query`` runs only as a task (``taskSupport: "required"``). A
client asks for one with ``tools/call`` and a ``task`` parameter, is answered with a
task, watches it with ``tasks/get`` and ``notifications/tasks/status``, and fetches
its result with ``tasks/result``. Through the hub the task id names its upstream
(``ev/...``) and belongs to the session that started it: another session gets the
same error as for an id that never existed.

The SDK's typed client refuses a ``CreateTaskResult`` as the answer of a
``tools/call``, so the tests talk over a session whose dispatcher they hold and send
these requests as plain JSON-RPC.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from pydantic import BaseModel, ConfigDict

from tests.everything_cases import Client
from tests.hubtest import (
    EVERYTHING_MARKS,
    everything_http,
    everything_toml,
    http_hub,
    http_session,
    stdio_hub,
    stdio_hub_params,
    write_config,
)

pytestmark = [*EVERYTHING_MARKS]

RESEARCH = "simulate-research-query"


class _Status(BaseModel):
    model_config = ConfigDict(extra="allow")


class TaskClient:
    """A client session plus its dispatcher, for requests the typed client refuses."""

    def __init__(self, session: ClientSession, dispatcher: JSONRPCDispatcher[Any],
                 statuses: list[dict[str, Any]]) -> None:
        self.session = session
        self.dispatcher = dispatcher
        self.statuses = statuses

    async def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        with anyio.fail_after(60):
            return await self.dispatcher.send_raw_request(method, params)

    async def start(self, topic: str) -> dict[str, Any]:
        """A research task; its ``task`` object."""
        answer = await self.rpc("tools/call", {"name": RESEARCH, "arguments": {"topic": topic},
                                               "task": {"ttl": 60_000}})
        assert set(answer) >= {"task"}, answer
        task: dict[str, Any] = answer["task"]
        return task


def _client(read: Any, write: Any) -> tuple[ClientSession, JSONRPCDispatcher[Any],
                                             list[dict[str, Any]]]:
    statuses: list[dict[str, Any]] = []

    async def on_status(params: _Status) -> None:
        statuses.append(dict(params.model_extra or {}))

    dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write)
    session = ClientSession(dispatcher=dispatcher, notification_bindings=[NotificationBinding(
        method="notifications/tasks/status", params_type=_Status, handler=on_status)])
    return session, dispatcher, statuses


@asynccontextmanager
async def stdio_task_client(params: StdioServerParameters) -> AsyncIterator[TaskClient]:
    async with stdio_client(params) as (read, write):
        session, dispatcher, statuses = _client(read, write)
        async with session:
            await session.initialize()
            yield TaskClient(session, dispatcher, statuses)


@asynccontextmanager
async def http_task_client(url: str) -> AsyncIterator[TaskClient]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
    ):
        session, dispatcher, statuses = _client(read, write)
        async with session:
            await session.initialize()
            yield TaskClient(session, dispatcher, statuses)


def _config(tmp_path: Path, upstream: str) -> Path:
    return write_config(tmp_path, everything_toml(upstream))


async def _until_done(client: TaskClient, task_id: str) -> dict[str, Any]:
    """``tasks/get`` until the task is terminal (bounded by the caller's deadline)."""
    while True:
        got = await client.rpc("tasks/get", {"taskId": task_id})
        assert got["taskId"] == task_id
        if got["status"] in ("completed", "failed", "cancelled"):
            return got
        await anyio.sleep(0.2)


async def _one_task_through(client: TaskClient) -> None:
    """Start a research task, follow it to its result; every id is the hub's."""
    caps = client.session.server_capabilities
    assert caps is not None and caps.tasks is not None, caps
    assert caps.tasks.requests is not None and caps.tasks.requests.tools is not None
    task = await client.start("tasks through a hub")
    task_id = task["taskId"]
    assert task_id.startswith("ev/") and task["status"] == "working", task
    listed = await client.rpc("tasks/list", {})
    assert [t["taskId"] for t in listed["tasks"]] == [task_id]
    with anyio.fail_after(60):
        done = await _until_done(client, task_id)
    assert done["status"] == "completed", done
    result = await client.rpc("tasks/result", {"taskId": task_id})
    text = result["content"][0]["text"]
    assert "Research Report: tasks through a hub" in text
    related = result.get("_meta", {}).get("io.modelcontextprotocol/related-task")
    assert related is None or related == {"taskId": task_id}
    # The upstream's status notifications reach the client under the hub's id.
    with anyio.fail_after(10):
        while not any(s.get("status") == "completed" for s in client.statuses):
            await anyio.sleep(0.05)
    assert {s["taskId"] for s in client.statuses} == {task_id}


async def test_a_research_task_runs_through_the_stdio_hub(tmp_path: Path) -> None:
    async with stdio_task_client(stdio_hub_params(_config(tmp_path, "stdio"))) as client:
        await _one_task_through(client)
        # Without ``task`` the tool that runs only as a task still fails at once, clearly.
        answer = await client.rpc("tools/call", {"name": RESEARCH, "arguments": {"topic": "x"}})
        assert answer.get("isError") is True
        assert "requires task augmentation" in answer["content"][0]["text"]


async def test_a_research_task_runs_through_the_http_hub(tmp_path: Path) -> None:
    async with (
        everything_http(tmp_path) as url,
        http_hub(_config(tmp_path, url), tmp_path) as hub,
        http_task_client(hub.mcp_url) as client,
    ):
        await _one_task_through(client)


async def test_another_session_cannot_see_or_touch_a_task(tmp_path: Path) -> None:
    async with (
        everything_http(tmp_path) as url,
        http_hub(_config(tmp_path, url), tmp_path) as hub,
        http_task_client(hub.mcp_url) as owner,
        http_task_client(hub.mcp_url) as other,
    ):
        task_id = (await owner.start("mine"))["taskId"]

        async def refused(method: str, task: str) -> tuple[int, str]:
            with pytest.raises(MCPError) as caught:
                await other.rpc(method, {"taskId": task})
            return caught.value.code, caught.value.message

        unknown = await refused("tasks/get", "ev/no-such-task")
        assert unknown[0] == types.INVALID_PARAMS
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert await refused(method, task_id) == unknown, method
        assert (await other.rpc("tasks/list", {}))["tasks"] == []
        # The owner's task was not cancelled by the other session's attempt.
        got = await owner.rpc("tasks/get", {"taskId": task_id})
        assert got["status"] in ("working", "completed"), got
        cancelled = await owner.rpc("tasks/cancel", {"taskId": task_id})
        assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"



@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_async_sampling_and_elicitation_tools_are_offered_and_answered(
        tmp_path: Path, transport: str) -> None:
    """The hub's upstream session takes task-augmented sampling and elicitation, so
    server-everything offers its async tools; their requests reach the calling client
    (plainly: the hub answers them at once) and the client's answers come back."""
    client = Client()

    async def run(session: ClientSession) -> None:
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"trigger-sampling-request-async", "trigger-elicitation-request-async"} <= names
        with anyio.fail_after(60):
            sampled = await session.call_tool("trigger-sampling-request-async",
                                              {"prompt": "async through the hub", "maxTokens": 9})
        text = sampled.content[0].text  # type: ignore[union-attr]
        assert text.startswith("[SYNC]") and "Hi, hub." in text, text
        assert "async through the hub" in str(client.sampled[-1])
        assert "task" not in client.sampled[-1]
        with anyio.fail_after(60):
            elicited = await session.call_tool("trigger-elicitation-request-async", {})
        text = elicited.content[0].text  # type: ignore[union-attr]
        assert text.startswith("[SYNC]") and "Ada Lovelace" in text, text
        assert client.elicited and "task" not in client.elicited[-1]

    if transport == "stdio":
        async with stdio_hub(_config(tmp_path, "stdio"), **client.kwargs()) as session:
            await run(session)
        return
    async with (
        everything_http(tmp_path) as url,
        http_hub(_config(tmp_path, url), tmp_path) as hub,
        http_session(hub.mcp_url, **client.kwargs()) as session,
    ):
        await run(session)


async def test_the_bridge_describes_execution_and_tool_call_runs_a_task(tmp_path: Path) -> None:
    """With tool_search bridging, ``tool_describe`` shows a tool's ``execution`` and a
    task-augmented ``tool_call`` starts the upstream's task under a hub id."""
    config = write_config(tmp_path, everything_toml("stdio", tool_search="on"))
    async with stdio_task_client(stdio_hub_params(config)) as client:
        described = await client.rpc("tools/call", {"name": "tool_describe",
                                                    "arguments": {"names": [RESEARCH]}})
        tool = json.loads(described["content"][0]["text"])["tools"][0]
        assert tool["execution"] == {"taskSupport": "required"}, tool
        answer = await client.rpc("tools/call", {
            "name": "tool_call", "arguments": {"name": RESEARCH, "arguments": {"topic": "bridged"}},
            "task": {"ttl": 60_000}})
        task_id = answer["task"]["taskId"]
        assert task_id.startswith("ev/"), answer
        with anyio.fail_after(60):
            assert (await _until_done(client, task_id))["status"] == "completed"
        result = await client.rpc("tasks/result", {"taskId": task_id})
        assert "Research Report: bridged" in result["content"][0]["text"]
