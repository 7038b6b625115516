"""Methods a protocol era removed are unknown methods to a client of that era.

The 2026-07-28 tasks extension has no ``tasks/result`` and no ``tasks/list``
(results come with ``tasks/get``; tasks are not listed). The hub serves both to
2025-11-25 clients and answers a 2026-07-28 client with -32601, as a server of
that era does.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.erastest import hub_client, modern_toml
from tests.hubtest import write_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tasks_result_and_tasks_list_are_unknown_methods_to_a_modern_client(
    tmp_path: Path, mode: str,
) -> None:
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(60):
        async with hub_client("stdio", mode, config, tmp_path) as client:
            session = client.session
            if mode == "legacy":
                listed = await session.send_request(types.ListTasksRequest(),
                                                    types.ListTasksResult)
                assert listed.tasks == []
                return
            for request in (types.ListTasksRequest(),
                            types.GetTaskPayloadRequest(
                                params=types.GetTaskPayloadRequestParams(task_id="t1"))):
                with pytest.raises(MCPError) as refused:
                    await session.send_request(request, types.ListTasksResult)
                assert refused.value.error.code == types.METHOD_NOT_FOUND
