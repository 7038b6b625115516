"""``Mcp-Method`` / ``Mcp-Name`` from 2026-07-28 clients: accepted when they match, refused when not.

A real hub process over Streamable HTTP, raw HTTP requests (so the headers can be
wrong on purpose). A request whose ``Mcp-Method`` differs from its body's
method, whose ``Mcp-Name`` differs from the tool name, prompt name or resource
URI it calls, or that repeats one of them, gets the SDK's standard error
(``HEADER_MISMATCH``, -32020, with HTTP 400) and is not served. The other direction
(the hub's requests to a 2026-07-28 upstream carry both headers) is
``test_requests_to_a_modern_http_upstream_carry_mcp_method_and_name``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY
from mcp_types.jsonrpc import HEADER_MISMATCH

from tests.erastest import asking_toml
from tests.hubtest import http_hub, write_config

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"


def _body(method: str, params: dict[str, Any]) -> dict[str, Any]:
    meta = {PROTOCOL_VERSION_META_KEY: VERSION, CLIENT_CAPABILITIES_META_KEY: {}}
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


async def _post(http: httpx2.AsyncClient, url: str, body: dict[str, Any],
                headers: list[tuple[str, str]], status: int = 200) -> dict[str, Any]:
    base = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", VERSION)]
    response = await http.post(url, json=body, headers=base + headers)
    assert response.status_code == status, response.text
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:")
                    and '"id"' in line)
    answer: dict[str, Any] = httpx2.Response(200, content=text).json()
    return answer


CALL = ("tools/call", {"name": "ask_events", "arguments": {}})
PROMPT = ("prompts/get", {"name": "ask_prompt"})
READ = ("resources/read", {"uri": "ask://sampled"})


async def test_mcp_method_and_name_are_checked_against_the_body(tmp_path: Path) -> None:
    config = write_config(tmp_path, asking_toml())
    with anyio.fail_after(60):
        async with http_hub(config, tmp_path) as hub, httpx2.AsyncClient(timeout=20) as http:
            url = hub.mcp_url
            ok = await _post(http, url, _body(*CALL), [("Mcp-Method", "tools/call"),
                                                      ("Mcp-Name", "ask_events")])
            assert "result" in ok and not ok["result"].get("isError"), ok
            listed = await _post(http, url, _body("tools/list", {}), [("Mcp-Method", "tools/list")])
            assert any(t["name"] == "ask_events" for t in listed["result"]["tools"])

            wrong: list[tuple[tuple[str, dict[str, Any]], list[tuple[str, str]], str]] = [
                (CALL, [("Mcp-Method", "tools/list"), ("Mcp-Name", "ask_events")], "mcp-method"),
                (CALL, [("Mcp-Name", "ask_events")], "mcp-method"),
                (CALL, [("Mcp-Method", "tools/call"), ("Mcp-Name", "ask_roots")], "mcp-name"),
                (CALL, [("Mcp-Method", "tools/call")], "mcp-name"),
                (CALL, [("Mcp-Method", "tools/call"), ("Mcp-Method", "tools/call"),
                        ("Mcp-Name", "ask_events")], "more than once"),
                (PROMPT, [("Mcp-Method", "prompts/get"), ("Mcp-Name", "other")], "mcp-name"),
                (READ, [("Mcp-Method", "resources/read"), ("Mcp-Name", "ask://other")],
                 "mcp-name"),
            ]
            for (method, params), headers, says in wrong:
                answer = await _post(http, url, _body(method, params), headers, status=400)
                assert answer.get("error", {}).get("code") == HEADER_MISMATCH, (headers, answer)
                assert says in answer["error"]["message"], answer
