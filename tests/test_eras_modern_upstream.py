"""A 2026-07-28-only upstream through the hub, for clients of both eras on both transports.

The upstream (built with the SDK) refuses the handshake and asks its questions
as input-required rounds. The hub connects with ``server/discover``
(``protocol = "2026"`` or ``"auto"``) and resolves every round through the
downstream client: real server-initiated requests for a 2025 client, the hub's
own input rounds (its own sealed state) for a 2026-07-28 client. The results
must equal what a 2026-07-28 client gets from the upstream directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ToolsListChanged

from tests.erastest import (
    MODERN,
    accepting,
    asking_over_http,
    direct_modern_client,
    hub_client,
    list_changed_arrives,
    modern_toml,
    text_of,
)
from tests.hubtest import EVERYTHING, write_config

pytestmark = pytest.mark.anyio

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("sample", {"prompt": "hi"}),
    ("elicit", {"message": "your name?"}),
    ("roots", {}),
    ("two_rounds", {"tag": "t"}),
]


async def _answers(client: Client, prefix: str) -> dict[str, str]:
    out = {name: text_of(await client.call_tool(prefix + name, args)) for name, args in CALLS}
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    out["progress"] = text_of(await client.call_tool(prefix + "progress", {"steps": 3},
                                                     progress_callback=progress))
    out["progress_seen"] = repr(seen)
    return out


async def _cancel_reaches_upstream(client: Client, prefix: str) -> None:
    async def cancelled() -> int:
        return text_of(await client.call_tool(prefix + "events", {})).count("cancelled")

    before = await cancelled()
    started = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async with anyio.create_task_group() as tg:
        async def slow() -> None:
            await client.call_tool(prefix + "slow", {"seconds": 60, "report": True},
                                   progress_callback=progress)
        tg.start_soon(slow)
        await started.wait()
        tg.cancel_scope.cancel()
    while await cancelled() <= before:
        await anyio.sleep(0.05)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_modern_only_upstream_serves_both_eras_like_it_serves_a_modern_client(
    tmp_path: Path, transport: str, mode: str,
) -> None:
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(120):
        async with direct_modern_client() as direct:
            expected = await _answers(direct, "")
        async with hub_client(transport, mode, config, tmp_path) as client:
            got = await _answers(client, "mod_")
            assert got == expected
            assert got["two_rounds"] == "sampled[m1]: echo:t:bob"
            assert got["progress_seen"] == "[1.0, 2.0, 3.0]"
            await _cancel_reaches_upstream(client, "mod_")
            await list_changed_arrives(client, mode == "legacy", "mod_", f"late_{transport}")


async def test_a_modern_client_never_sees_the_upstreams_own_state(tmp_path: Path) -> None:
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(60):
        async with hub_client("http", "auto", config, tmp_path) as client:
            first = await client.session.call_tool("mod_two_rounds", {"tag": "t"},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            assert list(first.input_requests or {}) == ["e"]  # the upstream's own key
            state = first.request_state or ""
            # The hub's sealed token, not the upstream's plain "r1".
            assert state.startswith("v1.") and len(state) > 40
            answers = accepting(first, "ann")
            second = await client.session.call_tool(
                "mod_two_rounds", {"tag": "t"}, input_responses=answers,
                request_state=state, allow_input_required=True)
            assert isinstance(second, types.InputRequiredResult)
            assert (second.request_state or "").startswith("v1.")
            assert second.request_state != state
            [(key, ask)] = (second.input_requests or {}).items()
            assert (key, ask.method) == ("s", "sampling/createMessage")
            # The upstream's own state is no key to the hub's rounds.
            with pytest.raises(MCPError) as raw:
                await client.session.call_tool("mod_two_rounds", {"tag": "t"},
                                               request_state="r2:ann",
                                               allow_input_required=True)
            assert raw.value.error.message == "Invalid or expired requestState"


async def test_answers_offered_with_the_first_request_go_to_the_upstreams_questions(
    tmp_path: Path,
) -> None:
    """``inputResponses`` on a first request answer the questions with those keys (extra
    keys ignored, an answer of the wrong shape asked again), as the server directly would."""
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(60):
        async with hub_client("http", "auto", config, tmp_path) as client:
            offered: dict[str, Any] = {
                "e": types.ElicitResult(action="accept", content={"answer": "ann"}),
                "unknown_extra_key": types.ElicitResult(action="accept", content={"x": 1}),
            }
            first = await client.session.call_tool(
                "mod_two_rounds", {"tag": "t"}, input_responses=offered,
                allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            # "e" was answered from the offer; the upstream's next question is asked.
            assert [(k, r.method) for k, r in (first.input_requests or {}).items()] == [
                ("s", "sampling/createMessage")]
            wrong = await client.session.call_tool(
                "mod_two_rounds", {"tag": "t"}, input_responses={"e": types.ListRootsResult(roots=[])},
                allow_input_required=True)
            assert isinstance(wrong, types.InputRequiredResult)
            assert list(wrong.input_requests or {}) == ["e"]


@pytest.mark.skipif(not EVERYTHING.exists(), reason="Node packages not installed (make setup)")
async def test_auto_discovers_a_modern_upstream_and_falls_back_for_a_2025_one(
    tmp_path: Path,
) -> None:
    # server-everything (TypeScript SDK) predates server/discover: auto falls back to the
    # handshake, and its sampling request still reaches the client.
    body = (modern_toml(protocol="auto")
            + f'[servers.ev]\ncommand = "{EVERYTHING}"\nargs = ["stdio"]\nprotocol = "auto"\n')
    config = write_config(tmp_path, body)
    with anyio.fail_after(90):
        async with hub_client("stdio", "auto", config, tmp_path) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"mod_two_rounds", "ev_trigger-sampling-request"} <= names
            result = await client.call_tool("mod_two_rounds", {"tag": "t"})
            assert text_of(result) == "sampled[m1]: echo:t:bob"
            sampled = await client.call_tool("ev_trigger-sampling-request",
                                             {"prompt": "Say hi to the hub", "maxTokens": 7})
            assert "Say hi to the hub" in text_of(sampled) and '"model": "m1"' in text_of(sampled)


async def test_requests_to_a_modern_http_upstream_carry_mcp_method_and_name(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        async with asking_over_http(MODERN, "mod", 'protocol = "2026"\n') as block:
            config = write_config(tmp_path, block)
            async with hub_client("http", "auto", config, tmp_path) as client:
                assert text_of(await client.call_tool("mod_two_rounds", {"tag": "t"})) == (
                    "sampled[m1]: echo:t:bob")
                assert text_of(await client.get_prompt("mod_greet", {"name": "ann"})) == (
                    "hello ann")
                assert text_of(await client.read_resource("mod://info")) == "info"
                seen = json.loads(text_of(await client.call_tool("mod_headers", {})))
    # The first call and both of its retries name the method and the tool.
    assert seen.count(["tools/call", "two_rounds"]) == 3
    assert ["tools/list", None] in seen
    assert ["server/discover", None] in seen
    # The upstream's own names: its prompt name (not the hub's prefixed one), the URI.
    assert ["prompts/get", "greet"] in seen
    assert ["resources/read", "mod://info"] in seen


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_upstreams_list_changed_reaches_open_listen_streams_as_said(
    tmp_path: Path, transport: str,
) -> None:
    # The upstream says its tools changed although a new listing shows the same tools:
    # the hub passes the word on instead of second-guessing it.
    config = write_config(tmp_path, modern_toml())
    with anyio.fail_after(60):
        async with hub_client(transport, "auto", config, tmp_path) as client, \
                client.listen(tools_list_changed=True) as sub:
            said = await client.call_tool("mod_add_tool", {"name": "events"})
            assert text_of(said) == "unchanged"
            async for event in sub:
                assert isinstance(event, ToolsListChanged)
                break
