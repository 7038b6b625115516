"""gzip-encoded list answers: built around a result deflated once, equal to the plain answer.

Unit tests decode the assembled answers with the decoders real clients use
(Python's ``gzip``, ``zlib`` with gzip framing as httpx uses it); the rest runs
a real hub (uvicorn on a loopback port) in front of 300 real tool definitions
(``bench/catalog_server.py``) and the echo upstream, and compares what a client
that accepts gzip gets with what one that does not gets, byte for byte.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_hub.downstream.lists.gzip_answer import (
    accepts_gzip,
    combine_operator,
    crc32_combine,
    deflate_result,
    gzip_answer,
)
from mcp_hub.downstream.lists.prepared import PreparedLists
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, http_session, write_config
from tests.system_services import require_binary

pytestmark = pytest.mark.anyio

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _decode_like_httpx(data: bytes) -> bytes:
    decoder = zlib.decompressobj(zlib.MAX_WBITS | 16)
    out = decoder.decompress(data) + decoder.flush()
    assert decoder.eof and decoder.unused_data == b""
    return out


@pytest.mark.parametrize("size", [0, 1, 5_000, 70_000, 1_200_000])
def test_crc32_combine_matches_zlib(size: int) -> None:
    rng = random.Random(size)
    a = rng.randbytes(rng.randrange(0, 300))
    b = rng.randbytes(size)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), combine_operator(len(b))) == zlib.crc32(a + b)


@pytest.mark.parametrize("prefix_size", [1, 40, 70_000])
def test_the_answer_decodes_to_prefix_result_suffix(prefix_size: int) -> None:
    rng = random.Random(prefix_size)
    words = [rng.choice(["tool", "name", "description", "schema", '"type":"object"', "{", "}"])
             for _ in range(60_000)]
    result = " ".join(words).encode()
    prefix = b'{"jsonrpc":"2.0","id":"' + b"x" * prefix_size + b'","result":'
    deflated = deflate_result(result)
    assert len(deflated.blocks) < len(result) / 3
    answer = gzip_answer(prefix, deflated, b"}")
    plain = prefix + result + b"}"
    assert gzip.decompress(answer) == plain
    assert _decode_like_httpx(answer) == plain
    # The same deflated result serves any other id.
    other = gzip_answer(b'{"jsonrpc":"2.0","id":7,"result":', deflated, b"}")
    assert gzip.decompress(other) == b'{"jsonrpc":"2.0","id":7,"result":' + result + b"}"


def test_an_empty_result_still_decodes() -> None:
    answer = gzip_answer(b"[", deflate_result(b""), b"]")
    assert gzip.decompress(answer) == b"[]"


@pytest.mark.parametrize(("header", "accepted"), [
    (b"gzip, deflate", True),
    (b"GZIP", True),
    (b"deflate, br", False),
    (b"gzip;q=0", False),
    (b"gzip;q=0, *", False),
    (b"*, gzip;q=0", False),
    (b"*", True),
    (b"*;q=0", False),
    (b"x-gzip", True),
    (b"br;q=1.0, gzip;q=0.5", True),
    (b"gzip;q=bogus", False),
    (b"identity", False),
])
def test_accept_encoding(header: bytes, accepted: bool) -> None:
    assert accepts_gzip([(b"accept-encoding", header)]) is accepted


def test_no_accept_encoding_is_no_gzip() -> None:
    assert accepts_gzip([(b"accept", b"*/*")]) is False


async def test_a_burst_of_gzip_lists_deflates_a_page_once() -> None:
    lists = PreparedLists(object())
    page = json.dumps({"tools": [{"name": f"t{i}", "description": "d" * 50} for i in range(2000)]}
                      ).encode()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            got = []

            async def ask() -> None:
                got.append(await lists.deflated(page))

            for _ in range(10):
                tg.start_soon(ask)
    assert lists.deflations == 1
    assert all(d is got[0] for d in got)
    again = await lists.deflated(page)
    assert again is got[0] and lists.deflations == 1
    other = page + b" "
    await lists.deflated(other)
    assert lists.deflations == 2


def _catalog_toml(count: int = 300) -> str:
    return "\n".join([
        "[servers.cat]", f"command = {json.dumps(PY)}",
        f"args = {json.dumps([str(ROOT / 'bench' / 'catalog_server.py'), str(count)])}",
        f"cwd = {json.dumps(str(ROOT))}", ""])


@pytest.fixture
async def big_hub(tmp_path: Path) -> AsyncIterator[str]:
    # Plain JSON bodies (``answers = "json"``), so the uncompressed answer compares with the
    # gzip one byte for byte.
    config = write_config(tmp_path, '[hub.http]\nanswers = "json"\n\n' + _catalog_toml() + "\n"
                          + echo_server_toml() + '\n[tool_search]\nmode = "off"\n')
    async with http_hub(config, tmp_path) as hub:
        yield hub.mcp_url


async def _session(client: httpx2.AsyncClient, url: str) -> str:
    r = await client.post(url, headers=HEADERS, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    r = await client.post(url, headers={**HEADERS, "mcp-session-id": sid},
                          content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert r.status_code == 202
    return sid


async def _list(client: httpx2.AsyncClient, url: str, sid: str, rid: object, encoding: str,
                lead: bytes = b"") -> httpx2.Response:
    body = lead + json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/list"}).encode()
    return await client.post(url, content=body, headers={
        **HEADERS, "mcp-session-id": sid, "accept-encoding": encoding})


def _sse_result(text: str) -> str:
    return next(line[6:] for line in text.splitlines()
                if line.startswith("data: ") and '"result"' in line)


async def test_gzip_list_equals_the_plain_and_the_sdk_answer(big_hub: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        with anyio.fail_after(60):
            sid = await _session(client, big_hub)
            await _list(client, big_hub, sid, "warm", "identity")
            for rid in (1, "a-string-id", 2**40):
                packed = await _list(client, big_hub, sid, rid, "gzip, deflate")
                plain = await _list(client, big_hub, sid, rid, "identity")
                sdk = await _list(client, big_hub, sid, rid, "gzip", lead=b" ")
                assert packed.headers["content-encoding"] == "gzip"
                assert packed.headers["vary"] == "accept-encoding"
                assert "content-encoding" not in plain.headers
                # What went over the wire is a fraction of the answer; decoded, it is the answer.
                assert int(packed.headers["content-length"]) < len(plain.content) / 3
                assert packed.content == plain.content
                assert packed.text == _sse_result(sdk.text)
                assert json.loads(packed.content)["id"] == rid
    assert len(json.loads(plain.content)["result"]["tools"]) >= 300


async def test_a_change_is_in_the_very_next_gzip_list_of_every_client(big_hub: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        with anyio.fail_after(90):
            sids = [await _session(client, big_hub) for _ in range(8)]
            before = await _list(client, big_hub, sids[0], 1, "gzip")
            assert b"echo_fresh_tool" not in before.content
            async with client.stream("GET", big_hub, headers={
                    "accept": "text/event-stream", "mcp-session-id": sids[0]}) as stream:
                assert stream.status_code == 200
                r = await client.post(big_hub, headers={**HEADERS, "mcp-session-id": sids[0]}, json={
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "echo_add_tool", "arguments": {"name": "fresh_tool"}}})
                assert r.status_code == 200 and '"isError":true' not in r.text, r.text
                async for line in stream.aiter_lines():  # as a client re-lists: when told to
                    if "notifications/tools/list_changed" in line:
                        break
            answers: list[httpx2.Response] = []

            async def relist(sid: str) -> None:
                answers.append(await _list(client, big_hub, sid, 3, "gzip"))

            async with anyio.create_task_group() as tg:
                for sid in sids:
                    tg.start_soon(relist, sid)
    assert len(answers) == 8
    for answer in answers:
        assert answer.headers["content-encoding"] == "gzip"
        assert "echo_fresh_tool" in [t["name"] for t in answer.json()["result"]["tools"]]


async def test_sdk_client_lists_and_calls_through_gzip_answers(big_hub: str) -> None:
    with anyio.fail_after(60):
        async with http_session(big_hub) as session:
            listed = await session.list_tools()
            result = await session.call_tool("echo_echo", {"text": "hi"})
    assert len(listed.tools) >= 300
    assert result.content[0].text == "hi"  # type: ignore[union-attr]


async def test_compress_lists_off(tmp_path: Path) -> None:
    config = write_config(tmp_path, _catalog_toml(120) + '\n[tool_search]\nmode = "off"\n',
                          hub="[hub.http]\ncompress_lists = false\n")
    async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=30) as client:
        with anyio.fail_after(60):
            sid = await _session(client, hub.mcp_url)
            r = await _list(client, hub.mcp_url, sid, 1, "gzip")
    assert r.status_code == 200
    assert "content-encoding" not in r.headers
    assert len(r.content) > 16 * 1024


_NODE_FETCH = r"""
const url = process.argv[1];
const base = {"content-type": "application/json", "accept": "application/json, text/event-stream"};
(async () => {
  let r = await fetch(url, {method: "POST", headers: base, body: JSON.stringify({jsonrpc: "2.0",
    id: 0, method: "initialize", params: {protocolVersion: "2025-11-25", capabilities: {},
    clientInfo: {name: "node-fetch", version: "1"}}})});
  const sid = r.headers.get("mcp-session-id");
  await r.text();
  const headers = {...base, "mcp-session-id": sid};
  r = await fetch(url, {method: "POST", headers,
    body: JSON.stringify({jsonrpc: "2.0", method: "notifications/initialized"})});
  await r.text();
  // The first request after the handshake may reach the hub before its
  // notifications/initialized was handled; the SDK path then answers it, as SSE.
  r = await fetch(url, {method: "POST", headers,
    body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "tools/list"})});
  await r.text();
  r = await fetch(url, {method: "POST", headers,
    body: JSON.stringify({jsonrpc: "2.0", id: 2, method: "tools/list"})});
  const body = await r.json();
  console.log(JSON.stringify({encoding: r.headers.get("content-encoding"),
                              tools: body.result.tools.length}));
})().catch((e) => { console.error(e); process.exit(1); });
"""


async def test_node_fetch_decodes_the_gzip_list(big_hub: str) -> None:
    """The fetch of Node (what the TypeScript SDK's client uses) asks for gzip by itself."""
    node = require_binary("node")
    with anyio.fail_after(60):
        done = await anyio.run_process([node, "-e", _NODE_FETCH, big_hub], check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["encoding"] == "gzip"
    assert seen["tools"] >= 300
