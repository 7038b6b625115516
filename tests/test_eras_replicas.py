"""Input rounds across hub replicas: a retry that lands on another replica is carried home.

Three hub replicas behind a real haproxy (round-robin per request, no
stickiness) and a real redis-server, sharing ``[hub.http] session_secret`` and
``[state] url``. A 2026-07-28 client (the SDK's ``Client``) sends each request
of a call on its own, so the retry of an input round lands on another replica
than the one whose background task runs the upstream call. That replica opens
the state (the key comes from the shared secret), forwards the retry over the
replica bus, and answers with the owner's result. Forged and replayed states
are still refused, wherever they land.
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

from tests.erastest import CALLBACKS, accepting, asking_toml, text_of
from tests.hubtest import HttpHub, write_config
from tests.replica_support import replicas, shared_state

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def _cluster(tmp: Path, monkeypatch: pytest.MonkeyPatch
                   ) -> AsyncIterator[tuple[list[HttpHub], str]]:
    def config(redis_url: str) -> Path:
        return write_config(tmp, asking_toml(), hub=shared_state(redis_url))

    async with replicas(tmp, monkeypatch, config, 3) as running:
        yield running.hubs, running.url


@asynccontextmanager
async def _client(url: str) -> AsyncIterator[Client]:
    async with (httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=60)) as http,
                Client(streamable_http_client(url, http_client=http), mode="auto",
                       **CALLBACKS) as client):
        assert client.protocol_version == "2026-07-28"
        yield client


async def _rounds(hubs: list[HttpHub]) -> list[dict[str, Any]]:
    async with httpx2.AsyncClient(timeout=10) as http:
        return [(await http.get(f"{h.base}/status.json")).json()["input_rounds"] for h in hubs]


def _refused(exc: pytest.ExceptionInfo[MCPError]) -> None:
    assert exc.value.error.code == types.INVALID_PARAMS
    assert exc.value.error.message == "Invalid or expired requestState"


async def test_a_rounds_retry_on_another_replica_reaches_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (hubs, url), _client(url) as client:
            # Elicitation, then sampling: three requests, each on the next replica.
            for i in range(6):
                assert text_of(await client.call_tool("ask_two_rounds", {"tag": f"t{i}"})) == (
                    f"sampled[m1]: echo:t{i}:bob")
            assert text_of(await client.call_tool("ask_roots", {})) == '["file:///tmp/one"]'
            # The upstream reports progress after its first question is answered, i.e.
            # while the retry (on another replica) waits: it reaches the client.
            seen: list[tuple[float, str | None]] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                seen.append((value, message))

            assert text_of(await client.call_tool("ask_two_rounds", {"tag": "p"},
                                                  progress_callback=progress)) == (
                "sampled[m1]: echo:p:bob")
            assert seen == [(1.0, "asked once")]
            results: dict[int, str] = {}

            async def one(i: int) -> None:
                results[i] = text_of(await client.call_tool("ask_two_rounds", {"tag": f"c{i}"}))

            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(one, i)
            # Over stdio the upstream's questions may go to another concurrent call's
            # round on that replica; each call still gets an answer of its own shape.
            assert all(r.startswith("sampled[m1]: echo:c") for r in results.values()), results
            assert len(results) == 10
            rounds = await _rounds(hubs)
            print(f"input rounds per replica: {rounds}")
            assert sum(r["forwarded"] for r in rounds) >= 14, rounds
            assert sum(r["served_for_other_replicas"] for r in rounds) >= 14, rounds
            while sum(r["alive"] for r in await _rounds(hubs)):
                await anyio.sleep(0.05)


async def test_forged_and_replayed_state_is_refused_on_every_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (hubs, url), _client(url) as client:
            first = await client.session.call_tool("ask_elicit", {"message": "q"},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state
            state = first.request_state
            answers = accepting(first, "bob")
            tampered = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
            # Three tries of each: one lands on every replica.
            for bad_state, args in [("v1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", {"message": "q"}),
                                    (tampered, {"message": "q"}),
                                    (state, {"message": "another question"})] * 3:
                with pytest.raises(MCPError) as refused:
                    await client.session.call_tool("ask_elicit", args, input_responses=answers,
                                                   request_state=bad_state,
                                                   allow_input_required=True)
                _refused(refused)
            final = await client.session.call_tool("ask_elicit", {"message": "q"},
                                                   input_responses=answers, request_state=state,
                                                   allow_input_required=True)
            assert text_of(final) == '{"action": "accept", "content": {"answer": "bob"}}'
            for _ in range(3):
                with pytest.raises(MCPError) as replayed:
                    await client.session.call_tool("ask_elicit", {"message": "q"},
                                                   input_responses=answers, request_state=state,
                                                   allow_input_required=True)
                _refused(replayed)
            assert sum(r["alive"] for r in await _rounds(hubs)) == 0


async def test_a_retry_whose_replica_is_gone_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (hubs, url), _client(url) as client:
            first = await client.session.call_tool("ask_elicit", {"message": "q"},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state
            [owner] = [h for h, r in zip(hubs, await _rounds(hubs), strict=True) if r["alive"]]
            owner.proc.kill()
            owner.proc.wait()
            answers = accepting(first, "bob")
            # The upstream call died with its replica: the retry is refused, and a new
            # call works on the replicas left.
            with pytest.raises(MCPError) as gone:
                await client.session.call_tool("ask_elicit", {"message": "q"},
                                               input_responses=answers,
                                               request_state=first.request_state,
                                               allow_input_required=True)
            _refused(gone)
            assert '"bob"' in text_of(await client.call_tool("ask_elicit", {"message": "q"}))


async def _events(client: Client) -> str:
    """The asking upstreams' events on every replica (round-robin: one call each)."""
    return "\n".join([text_of(await client.call_tool("ask_events", {})) for _ in range(3)])


async def test_a_forwarded_retry_cancelled_by_its_client_cancels_the_upstream_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with anyio.fail_after(180):
        async with _cluster(tmp_path, monkeypatch) as (hubs, url), _client(url) as client:
            first = await client.session.call_tool("ask_ask_then_slow", {"seconds": 60},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.request_state
            answers = accepting(first, "go")

            async def retry() -> None:
                await client.session.call_tool(
                    "ask_ask_then_slow", {"seconds": 60}, input_responses=answers,
                    request_state=first.request_state, allow_input_required=True)

            async with anyio.create_task_group() as tg:
                tg.start_soon(retry)
                while "answered: accept" not in await _events(client):
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # the client gives up on its retry
            closed = anyio.current_time()
            while "cancelled" not in await _events(client):
                await anyio.sleep(0.05)
            print(f"the upstream call was cancelled {anyio.current_time() - closed:.1f} s after "
                  "the client closed its forwarded retry")
            while sum(r["alive"] for r in await _rounds(hubs)):
                await anyio.sleep(0.05)
            assert sum(r["forwarded"] for r in await _rounds(hubs)) >= 1
