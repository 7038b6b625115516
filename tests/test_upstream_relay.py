"""Server-to-client requests, progress and cancellation travel to the right downstream call."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp.types as types
import pytest

from mcp_hub.pipeline.context import CallContext
from tests.fixtures_upstream import echo_block, running, script_block, text_of

pytestmark = pytest.mark.anyio


class Client(CallContext):
    """A downstream client with sampling, elicitation and roots, answering canned values."""

    def __init__(self, label: str, *, capable: bool = True) -> None:
        caps = types.ClientCapabilities(
            sampling=types.SamplingCapability(),
            elicitation=types.ElicitationCapability(form=types.FormElicitationCapability()),
            roots=types.RootsCapability(),
        ) if capable else types.ClientCapabilities()
        super().__init__(client_capabilities=caps, progress_token=label)
        self.label = label
        self.arrived = anyio.Event()

    async def report_progress(self, progress: float, total: float | None = None,
                              message: str | None = None) -> None:
        self.arrived.set()

    async def create_message(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"from {self.label}"), model="m")

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": self.label, "n": "x"})

    async def list_roots(self) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=f"file:///{self.label}")])


async def test_sampling_and_elicitation_reach_the_client_whose_call_caused_them() -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (_, registry):
            sampled = await registry.dispatch("echo_sample", {"prompt": "hi"},
                                              call=Client("alice"))
            assert text_of(sampled) == "sampled[m]: from alice"
            elicited = await registry.dispatch("echo_elicit", {"message": "?"},
                                               call=Client("bob"))
            assert '"answer": "bob"' in text_of(elicited)


async def test_a_client_without_the_capability_gets_a_clear_error_upstream() -> None:
    body = script_block("probe", "probe_server.py")
    with anyio.fail_after(30):
        async with running(body) as (_, registry):
            result = await registry.dispatch("probe_ask_both", {},
                                             call=Client("x", capable=False))
            text = text_of(result)
            assert text == (
                "error: mcp-hub cannot relay sampling/createMessage: no downstream client "
                "with a call in flight supports sampling | error: mcp-hub cannot relay "
                "elicitation/create: no downstream client with a call in flight supports "
                "elicitation")
            # roots/list is never an error: without a client to ask, the hub answers
            # itself (here: no clients, no file roots, so an empty list).
            roots = await registry.dispatch("probe_roots", {}, call=CallContext())
            assert text_of(roots) == "[]"


async def test_roots_list_is_answered_by_the_calling_client() -> None:
    body = script_block("probe", "probe_server.py")
    with anyio.fail_after(30):
        async with running(body) as (_, registry):
            result = await registry.dispatch("probe_roots", {}, call=Client("carol"))
            assert text_of(result) == '["file:///carol"]'


async def test_with_several_calls_in_flight_the_most_recent_capable_one_answers(
    tmp_path: Path,
) -> None:
    body = script_block("probe", "probe_server.py",
                        extra=f'env = {{ PROBE_MARKER = "{tmp_path / "m"}" }}')
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            conn = manager.connection("probe")
            assert conn is not None
            async with anyio.create_task_group() as tg:
                # An older capable call and a newer incapable one are in flight.
                old, middle = Client("older"), Client("middle", capable=False)
                tg.start_soon(lambda: registry.dispatch("probe_wait", {}, call=old))
                await old.arrived.wait()
                tg.start_soon(lambda: registry.dispatch("probe_wait", {}, call=middle))
                await middle.arrived.wait()
                assert conn.status().in_flight == 2
                result = await registry.dispatch("probe_roots", {},
                                                 call=Client("newest", capable=False))
                assert text_of(result) == '["file:///older"]'
                tg.cancel_scope.cancel()


async def test_cancelling_a_call_cancels_it_upstream(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    body = script_block("probe", "probe_server.py", extra=f'env = {{ PROBE_MARKER = "{marker}" }}')
    with anyio.fail_after(30):
        async with running(body) as (manager, registry):
            conn = manager.connection("probe")
            assert conn is not None
            caller = Client("c")
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lambda: registry.dispatch("probe_wait", {}, call=caller))
                    await caller.arrived.wait()
                    assert conn.status().in_flight == 1
                    scope.cancel()
            assert conn.status().in_flight == 0
            # The upstream saw notifications/cancelled: its handler ran its finally block.
            result = None
            while not marker.exists():
                # No event crosses the process boundary; ask the server something until the
                # file shows up (each round trip is one more chance for it to be written).
                result = await registry.dispatch("probe_roots", {}, call=CallContext())
            assert marker.read_text() == "cancelled\n"
            del result


async def test_upstream_progress_reaches_the_caller_with_a_progress_token() -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    class Progress(CallContext):
        async def report_progress(self, progress: float, total: float | None = None,
                                  message: str | None = None) -> None:
            reports.append((progress, total, message))

    with anyio.fail_after(30):
        async with running(echo_block()) as (_, registry):
            result = await registry.dispatch("echo_slow", {"seconds": 0.05, "steps": 3},
                                             call=Progress(progress_token=7))
            assert not result.is_error
            assert reports == [(1.0, 3.0, "step 1/3"), (2.0, 3.0, "step 2/3"),
                               (3.0, 3.0, "step 3/3")]
            reports.clear()
            await registry.dispatch("echo_slow", {"seconds": 0.05, "steps": 3},
                                    call=Progress())
            assert reports == []
