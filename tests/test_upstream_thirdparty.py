"""Upstreams nobody here wrote: mcp-server-time (PyPI) and server-everything (npm)."""

from __future__ import annotations

import json
import os

import anyio
import mcp.types as types
import pytest

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import ServerState
from tests.fixtures_upstream import PY, ROOT, running, text_of, toml_str

pytestmark = pytest.mark.anyio

NODE_BIN = ROOT / "js" / "node_modules" / ".bin"
EVERYTHING = NODE_BIN / "mcp-server-everything"


async def test_mcp_server_time_connects_lists_and_answers() -> None:
    body = (f"[servers.time]\ncommand = {toml_str(PY)}\n"
            'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]\n'
            'env = { TZ = "UTC" }\n')
    with anyio.fail_after(60):
        async with running(body) as (manager, registry):
            status = manager.statuses()[0]
            assert status.state is ServerState.READY, status.last_error
            assert set(registry.toolsets()["mcp-time"]) >= {"time_get_current_time",
                                                            "time_convert_time"}
            result = await registry.dispatch("time_get_current_time", {"timezone": "UTC"},
                                             call=CallContext())
            assert not result.is_error, text_of(result)
            assert json.loads(text_of(result))["timezone"] == "UTC"


@pytest.mark.node
@pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)")
async def test_server_everything_connects_lists_and_answers() -> None:
    path = f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    body = (f"[servers.everything]\ncommand = {toml_str(str(EVERYTHING))}\n"
            f'args = ["stdio"]\nprefix = "ev"\nexclude = ["trigger-*"]\n'
            f"env = {{ PATH = {toml_str(path)} }}\n")
    kinds: list[str] = []
    with anyio.fail_after(90):
        async with running(body, on_change=kinds.append) as (manager, registry):
            status = manager.statuses()[0]
            assert status.state is ServerState.READY, status.last_error
            names = registry.toolsets()["mcp-everything"]
            assert "ev_echo" in names
            assert not any(n.startswith("ev_trigger-") for n in names)
            assert status.prompts > 0 and status.resources > 0
            result = await registry.dispatch("ev_echo", {"message": "hello"},
                                             call=CallContext())
            assert not result.is_error
            assert "hello" in text_of(result)
            prompt = manager.list_prompts()[0]
            assert prompt.name.startswith("ev_")
            resource = manager.list_resources()[0]
            read = await manager.read_resource(str(resource.uri), CallContext())
            assert read.contents
            assert isinstance(read.contents[0], types.TextResourceContents | types.BlobResourceContents)
