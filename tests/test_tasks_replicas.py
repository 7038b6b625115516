"""Tasks across a reconnect and across hub replicas, against ``server-everything``.

Two hub replicas share a real redis-server (``[state] url``) and ``[hub.http]
session_secret``; a real haproxy spreads requests over them round-robin. Both
front one ``server-everything`` over Streamable HTTP, which keeps tasks per
upstream session: a task started through replica A exists only in A's upstream
session. Task ownership is in the state backend, so a ``tasks/*`` request of
the same identity that lands on replica B (after a reconnect, or simply the next
request through the load balancer) is carried to A and answered there. Another
identity gets the same error as for an id that never existed, on either replica.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.hubtest import EVERYTHING, HttpHub, everything_toml, write_config
from tests.replica_support import replicas, shared_state
from tests.test_everything import everything_http
from tests.test_tasks import TaskClient, _client, _until_done

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.node,
    pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)"),
]

TOKEN = "tasks-replica-token-aaaaaaaaaaaaaaaaaaaaaaa"
OTHER_TOKEN = "tasks-replica-token-bbbbbbbbbbbbbbbbbbbbbbb"


@asynccontextmanager
async def _cluster(tmp: Path, monkeypatch: pytest.MonkeyPatch
                   ) -> AsyncIterator[tuple[list[HttpHub], str]]:
    """redis-server, server-everything, two replicas, haproxy; yields them and its /mcp URL."""
    async with everything_http(tmp) as upstream:
        def config(redis_url: str) -> Path:
            return write_config(tmp, everything_toml(upstream), hub=shared_state(
                redis_url, f'auth_tokens = ["{TOKEN}", "{OTHER_TOKEN}"]\n'))

        async with replicas(tmp, monkeypatch, config, 2) as running:
            yield running.hubs, running.url


@asynccontextmanager
async def _task_client(url: str, token: str) -> AsyncIterator[TaskClient]:
    async with (
        httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60),
                           headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(url, http_client=http) as (read, write),
    ):
        session, dispatcher, statuses = _client(read, write)
        async with session:
            await session.initialize()
            yield TaskClient(session, dispatcher, statuses)


async def _refused(client: TaskClient, method: str, task_id: str) -> tuple[int, str]:
    with pytest.raises(MCPError) as caught:
        await client.rpc(method, {"taskId": task_id})
    return caught.value.code, caught.value.message


async def _others_see_nothing(url: str, task_id: str) -> None:
    """Another identity: every tasks/* of ``task_id`` fails as for an unknown id."""
    async with _task_client(url, OTHER_TOKEN) as other:
        unknown = await _refused(other, "tasks/get", "ev/no-such-task")
        assert unknown[0] == types.INVALID_PARAMS
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            assert await _refused(other, method, task_id) == unknown, method
        assert (await other.rpc("tasks/list", {}))["tasks"] == []


async def test_a_task_outlives_its_session_and_is_served_by_the_other_replica(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Started through replica A; the client reconnects to replica B and follows it."""
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (hubs, _):
            a, b = hubs
            async with _task_client(a.mcp_url, TOKEN) as first:
                task_id = (await first.start("across replicas"))["taskId"]
                assert task_id.startswith("ev/")
            async with _task_client(b.mcp_url, TOKEN) as again:
                listed = await again.rpc("tasks/list", {})
                assert [t["taskId"] for t in listed["tasks"]] == [task_id], listed
                done = await _until_done(again, task_id)
                assert done["status"] == "completed", done
                result = await again.rpc("tasks/result", {"taskId": task_id})
                assert "Research Report: across replicas" in result["content"][0]["text"]
            for hub in hubs:
                await _others_see_nothing(hub.mcp_url, task_id)
            # The owner, reconnected to A (where the task is), still has it.
            async with _task_client(a.mcp_url, TOKEN) as back:
                assert (await back.rpc("tasks/get", {"taskId": task_id}))["status"] == "completed"


async def test_one_session_through_the_load_balancer_runs_and_cancels_tasks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each request of one session lands on the next replica; every tasks/* still works."""
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (_, url), _task_client(url, TOKEN) as client:
            started: list[dict[str, Any]] = [await client.start(f"topic {i}") for i in range(3)]
            ids = [t["taskId"] for t in started]
            for _ in range(2):  # every replica in turn answers for all three
                listed = await client.rpc("tasks/list", {})
                assert sorted(t["taskId"] for t in listed["tasks"]) == sorted(ids), listed
            cancelled = await client.rpc("tasks/cancel", {"taskId": ids[0]})
            assert cancelled["taskId"] == ids[0] and cancelled["status"] == "cancelled"
            for i, task_id in enumerate(ids[1:], start=1):
                assert (await _until_done(client, task_id))["status"] == "completed"
                result = await client.rpc("tasks/result", {"taskId": task_id})
                assert f"Research Report: topic {i}" in result["content"][0]["text"]
            assert (await client.rpc("tasks/get", {"taskId": ids[0]}))["status"] == "cancelled"
            await _others_see_nothing(url, ids[1])
