"""A caller's definitions in slices, and large answers written in pieces.

An in-process hub (no upstream) holding the 1,000 real tool definitions of the
list benchmark; a real pipe for the stdio writer; a recording ASGI ``send`` for
the HTTP one, and a real hub over uvicorn in front of the benchmark's catalog
server for the bytes of a large answer sent in pieces.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from starlette.types import Message

from bench.catalog_server import real_tools
from mcp_hub.config.model import load_config
from mcp_hub.downstream.http.paced_send import paced
from mcp_hub.downstream.lists import prepared as prepared_lists
from mcp_hub.downstream.lists.fragments import Slicer
from mcp_hub.downstream.lists.prepared import PreparedLists
from mcp_hub.hub.access import EVERYONE, Caller
from mcp_hub.hub.core import Hub
from mcp_hub.plumbing.pipes import CoalescingWriter, open_read_pipe, open_write_pipe
from tests.hubtest import PY, ROOT, http_hub, write_config
from tests.test_http_fastpath import RawSession, sse_data
from tests.test_list_fragments import TOOLS, register

pytestmark = pytest.mark.anyio

NARROW = Caller(profile="narrow")


async def _ok(**_: Any) -> str:
    return "ok"


def add_tool(hub: Hub, name: str, toolset: str = "extra") -> None:
    hub.registry.register(name, toolset, {"name": name, "description": "x",
                                          "parameters": {"type": "object", "properties": {}}},
                          _ok, is_async=True, description="x")


@pytest.fixture(params=["off", "on"])
async def hub(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Hub]:
    body = f'[tool_search]\nmode = "{request.param}"\n\n[profiles.narrow]\ntoolsets = ["few"]\n'
    config = load_config(write_config(tmp_path, body))
    async with Hub(config, load_plugin_modules=False) as running:
        for tool in real_tools(TOOLS):
            register(running, tool)
        add_tool(running, "few_one", "few")
        yield running


class Turns:
    """Another task that counts the turns of the event loop it gets."""

    def __init__(self) -> None:
        self.count = 0
        self.done = anyio.Event()

    async def run(self) -> None:
        while not self.done.is_set():
            self.count += 1
            await anyio.lowlevel.checkpoint()


async def test_other_tasks_run_between_the_definition_slices_after_a_change(hub: Hub) -> None:
    hub.tool_definitions(EVERYONE)  # warm: only the change is new below
    add_tool(hub, "fresh_tool")
    turns, pauses = Turns(), 0
    slicer = Slicer(budget=0.0)  # yield at every step

    async def pause() -> None:
        nonlocal pauses
        pauses += 1
        await slicer.checkpoint()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(turns.run)
            await anyio.lowlevel.checkpoint()
            before = turns.count
            sliced = await hub.tool_definitions_sliced(EVERYONE, pause)
            turns.done.set()
    assert pauses > TOOLS // 64  # steps of a few dozen tools, not one piece
    assert turns.count - before >= pauses - 1
    assert sliced == hub.tool_definitions(EVERYONE)
    assert "fresh_tool" in {d["name"] for d in sliced}


async def test_sliced_definitions_keep_each_profile_its_own(hub: Hub) -> None:
    add_tool(hub, "few_two", "few")
    with anyio.fail_after(30):
        narrow = await hub.tool_definitions_sliced(NARROW, Slicer(budget=0.0).checkpoint)
        everyone = await hub.tool_definitions_sliced(EVERYONE, Slicer(budget=0.0).checkpoint)
    assert narrow == hub.tool_definitions(NARROW)
    assert {"few_one", "few_two"} <= {d["name"] for d in narrow}
    assert len(everyone) > len(narrow)


async def test_a_change_during_the_slices_is_in_the_answer_of_that_list(
        hub: Hub, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry changes while a list is prepared: that list already shows it."""
    monkeypatch.setattr(prepared_lists, "Slicer", lambda: Slicer(budget=0.0))
    lists = PreparedLists(hub)
    with anyio.fail_after(30):
        await lists.result("tools", EVERYONE, "2025-11-25")
        add_tool(hub, "first_change")
        seen = hub.registry.generation

        async def change_once_started() -> None:
            while not lists._flights:  # a preparation is under way
                await anyio.lowlevel.checkpoint()
            add_tool(hub, "during_slices")

        async with anyio.create_task_group() as tg:
            tg.start_soon(change_once_started)
            data = await lists.result("tools", EVERYONE, "2025-11-25")
    assert hub.registry.generation > seen
    listed = {t["name"] for t in json.loads(data)["tools"]}
    if hub.config.tool_search.mode == "off":
        assert {"first_change", "during_slices"} <= listed
    assert lists.preparations >= 2  # the one overtaken by the change was not kept


async def test_a_large_answer_leaves_a_pipe_unchanged_in_pieces_in_order() -> None:
    big = json.dumps({"tools": [{"name": f"t{i}", "d": "x" * 90} for i in range(15_000)]}).encode()
    small = b'{"jsonrpc":"2.0","id":2,"result":{}}\n'
    rfd, wfd = os.pipe()
    with open(rfd, "rb", buffering=0) as rfile, open(wfd, "wb", buffering=0) as wfile:
        reader, rtransport = await open_read_pipe(rfile, limit=1 << 24)
        out = CoalescingWriter(await open_write_pipe(wfile), 1 << 20, chunk=64 * 1024)
        sizes: list[int] = []
        write = out.writer.write
        out.writer.write = lambda data: (sizes.append(len(data)), write(data))[1]  # type: ignore[method-assign]
        turns = Turns()
        received = bytearray()
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(turns.run)
                await out.send(big + b"\n")
                await out.send(small)
                while len(received) < len(big) + 1 + len(small):
                    received += await reader.read(1 << 20)
                turns.done.set()
            out.close()
        rtransport.close()
    assert bytes(received) == big + b"\n" + small
    assert max(sizes) <= 64 * 1024 and len(sizes) >= len(big) // (64 * 1024)
    assert turns.count >= len(sizes) - 1


async def test_a_large_http_body_is_sent_in_pieces_with_the_same_bytes() -> None:
    body = bytes(range(256)) * 4000 + b"end"
    sent: list[Message] = []
    turns = Turns()

    async def send(message: Message) -> None:
        sent.append(message)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(turns.run)
            await anyio.lowlevel.checkpoint()
            before = turns.count
            out = paced(send, chunk=100_000)
            await out({"type": "http.response.start", "status": 200, "headers": []})
            await out({"type": "http.response.body", "body": body})
            await out({"type": "http.response.body", "body": b"small"})
            turns.done.set()
    bodies = sent[1:-1]
    assert b"".join(m["body"] for m in bodies) == body
    assert len(bodies) == -(-len(body) // 100_000)
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]
    assert sent[-1] == {"type": "http.response.body", "body": b"small"}
    assert turns.count - before >= len(bodies) - 1


async def test_a_large_list_over_http_has_the_sdk_bytes_when_sent_in_pieces(tmp_path: Path) -> None:
    """A real hub over uvicorn, 300 real tools (about 500 KB, four pieces): the fast path's
    answer, written in pieces, equals the SDK path's answer byte for byte."""
    catalog = [str(ROOT / "bench" / "catalog_server.py"), "300"]
    config = write_config(tmp_path, "\n".join([
        '[hub.http]', 'answers = "json"', '',  # the JSON body written in pieces
        '[tool_search]', 'mode = "off"', '', '[servers.cat]', f"command = {json.dumps(PY)}",
        f"args = {json.dumps(catalog)}", f"cwd = {json.dumps(str(ROOT))}", ""]))
    # Uncompressed, so the answer is the one written in pieces (tests/test_list_gzip.py: gzip).
    async with http_hub(config, tmp_path, timeout=60) as hub, \
            httpx2.AsyncClient(timeout=30, headers={"accept-encoding": "identity"}) as client:
        raw = RawSession(client, hub.mcp_url)
        with anyio.fail_after(60):
            await raw.open()
            fast = await raw.request("tools/list")
            raw._ids -= 1  # the same id, so the two answers can be compared byte for byte
            slow = await raw.request("tools/list", lead=b" ")
    assert fast.headers["content-type"] == "application/json"
    assert len(fast.content) > 3 * 128 * 1024
    assert int(fast.headers["content-length"]) == len(fast.content)
    assert [fast.text] == [d for d in sse_data(slow.text) if '"result"' in d]
    assert len(fast.json()["result"]["tools"]) >= 300
