"""Task ownership in the state backend (mcp_hub.hub.task_owners), on the embedded backend.

The replica tests (tests/test_tasks_replicas.py) run the same code on Redis
between two hub processes; these check the rules without Node or Redis.
"""

from __future__ import annotations

import pytest

from mcp_hub.hub.task_owners import TaskOwners, owner_digest
from mcp_hub.state.embedded import EmbeddedState

pytestmark = pytest.mark.anyio


async def test_only_the_owner_finds_a_task_and_the_store_holds_no_owner_in_clear() -> None:
    state = EmbeddedState()
    owners = TaskOwners(state)
    await owners.record("ev/abc", "ev", "up-1", "identity:alice", 60)
    found = await owners.find("ev/abc", "identity:alice")
    assert found is not None
    assert (found.server, found.upstream_id, found.replica) == ("ev", "up-1", owners.replica)
    assert await owners.find("ev/abc", "identity:bob") is None
    assert await owners.find("ev/nope", "identity:alice") is None
    raw = await state.get("task:ev/abc")
    assert raw is not None and b"alice" not in raw and owner_digest("identity:alice").encode() in raw
    assert [t.hub_id for t in await owners.owned("identity:alice")] == ["ev/abc"]
    assert await owners.owned("identity:bob") == []


async def test_another_replica_sharing_the_store_sees_who_holds_the_task() -> None:
    state = EmbeddedState()
    here, there = TaskOwners(state), TaskOwners(state)
    await here.record("ev/x", "ev", "up-2", "session:s1", 60)
    found = await there.find("ev/x", "session:s1")
    assert found is not None and found.replica == here.replica != there.replica
