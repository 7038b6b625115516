"""Held input rounds: bounded in time, safe against forged or replayed state, and at scale.

A real hub over Streamable HTTP in front of the 2025-era asking fixture; the
clients are the SDK's ``Client`` negotiating 2026-07-28. The hub's
``/status.json`` reports how many rounds are alive and how many expired.
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
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.erastest import CALLBACKS, accepting, asking_over_http, asking_toml, text_of
from tests.hubtest import HttpHub, http_hub, write_config

pytestmark = pytest.mark.anyio

TOKENS = ["a" * 40, "b" * 40]


async def _rounds(hub: HttpHub, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http:
        body = (await http.get(f"{hub.base}/status.json")).json()
    rounds: dict[str, Any] = body["input_rounds"]
    return rounds


@asynccontextmanager
async def _client(hub: HttpHub, token: str | None = None, **kwargs: Any
                  ) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60)) as http:
        transport = streamable_http_client(hub.mcp_url, http_client=http)
        async with Client(transport, mode="auto", **{**CALLBACKS, **kwargs}) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


async def _first_round(client: Client, tool: str, args: dict[str, Any]
                       ) -> types.InputRequiredResult:
    first = await client.session.call_tool(tool, args, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    assert first.input_requests and first.request_state
    return first


def _refused(exc: pytest.ExceptionInfo[MCPError]) -> None:
    assert exc.value.error.code == types.INVALID_PARAMS
    assert exc.value.error.message == "Invalid or expired requestState"


async def test_an_unanswered_round_ends_within_its_ttl_and_the_upstream_is_told(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, asking_toml(), hub="input_round_ttl = 1\n")
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, _client(hub) as client:
            first = await _first_round(client, "ask_ask_and_record", {"message": "m"})
            [ask] = first.input_requests.values()  # type: ignore[union-attr]
            assert ask.method == "elicitation/create"
            assert (await _rounds(hub))["alive"] == 1
            # Nobody answers. The upstream's pending elicitation must fail, then the round goes.
            async with Client(hub.mcp_url, mode="legacy") as observer:
                while "error:" not in text_of(await observer.call_tool("ask_events", {})):
                    await anyio.sleep(0.05)
                events = text_of(await observer.call_tool("ask_events", {}))
            assert "input-round TTL" in events
            while (await _rounds(hub))["alive"]:
                await anyio.sleep(0.05)
            assert (await _rounds(hub))["expired"] == 1
            with pytest.raises(MCPError) as late:
                await client.session.call_tool(
                    "ask_ask_and_record", {"message": "m"}, allow_input_required=True,
                    input_responses=accepting(first, "x"),
                    request_state=first.request_state)
            _refused(late)


async def test_forged_tampered_rebound_and_replayed_state_is_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path, asking_toml())
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, _client(hub) as client:
            first = await _first_round(client, "ask_elicit", {"message": "q"})
            assert first.request_state is not None
            answers = accepting(first, "bob")
            state = first.request_state
            tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
            for bad_state, args in [("v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", {"message": "q"}),
                                    (tampered, {"message": "q"}),
                                    (state, {"message": "another question"})]:
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool("ask_elicit", args, input_responses=answers,
                                                   request_state=bad_state,
                                                   allow_input_required=True)
                _refused(refused)
            final = await client.session.call_tool("ask_elicit", {"message": "q"},
                                                   input_responses=answers, request_state=state,
                                                   allow_input_required=True)
            assert isinstance(final, types.CallToolResult)
            assert text_of(final) == '{"action": "accept", "content": {"answer": "bob"}}'
            with pytest.raises(MCPError) as replayed:
                await client.session.call_tool("ask_elicit", {"message": "q"},
                                               input_responses=answers, request_state=state,
                                               allow_input_required=True)
            _refused(replayed)
            assert (await _rounds(hub))["alive"] == 0


async def test_state_minted_for_one_identity_is_refused_for_another(tmp_path: Path) -> None:
    tokens = ", ".join(f'"{t}"' for t in TOKENS)
    config = write_config(tmp_path, asking_toml(), hub=f"[hub.http]\nauth_tokens = [{tokens}]\n")
    with anyio.fail_after(90):
        async with (http_hub(config, tmp_path, probe="/healthz") as hub,
                    _client(hub, TOKENS[0]) as alice, _client(hub, TOKENS[1]) as bob):
            first = await _first_round(alice, "ask_elicit", {"message": "q"})
            answers = accepting(first, "eve")
            with pytest.raises(MCPError) as foreign:
                await bob.session.call_tool("ask_elicit", {"message": "q"},
                                            input_responses=answers,
                                            request_state=first.request_state,
                                            allow_input_required=True)
            _refused(foreign)
            # The owner's retry still works: the refusal did not consume the round.
            final = await alice.session.call_tool("ask_elicit", {"message": "q"},
                                                  input_responses=answers,
                                                  request_state=first.request_state,
                                                  allow_input_required=True)
            assert '"eve"' in text_of(final)


async def test_100_concurrent_modern_calls_each_needing_two_rounds(tmp_path: Path) -> None:
    # Over Streamable HTTP the upstream's questions name the call they belong to; over
    # stdio the hub can only guess (the most recent call), for 2025 clients just the same.
    results: dict[int, str] = {}
    with anyio.fail_after(240):
        async with asking_over_http() as block:
            config = write_config(tmp_path, block)
            async with http_hub(config, tmp_path) as hub, _client(hub) as client:
                async def one(i: int) -> None:
                    result = await client.call_tool("ask_two_rounds", {"tag": f"t{i}"})
                    results[i] = text_of(result)

                async with anyio.create_task_group() as tg:
                    for i in range(100):
                        tg.start_soon(one, i)
                assert results == {i: f"sampled[m1]: echo:t{i}:bob" for i in range(100)}
                rounds = await _rounds(hub)
                assert rounds["alive"] == 0
                assert rounds["expired"] == 0
