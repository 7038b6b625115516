"""A rewritten call's telemetry, metrics and status carry the exposed and the upstream's name.

A real hub (in-process) in front of the real trace fixture (tests/fixtures/trace_server.py),
its spans and metrics exported to a real OTLP/HTTP receiver (tests/otlp_receiver.py).
The server renames the upstream's ``trace_seen`` to ``seen_by_hub``; a profile renames
that again to ``look``.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import pytest

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from tests.hubtest import write_config
from tests.telemetry_parts import (
    CLIENT,
    SERVER,
    fast_export,
    otlp_receiver,
    telemetry_toml,
    trace_server_toml,
)

pytestmark = pytest.mark.anyio

UPSTREAM_TOOL = "mcp_hub.upstream.tool.name"


@pytest.fixture(autouse=True)
def _fast_export(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_export(monkeypatch)


def _config(tmp: Path, endpoint: str) -> Path:
    renames = ('\n[servers.trace.tools.trace_seen]\nname = "seen_by_hub"\n\n'
               '[profiles.support.tools.seen_by_hub]\nname = "look"\n')
    return write_config(tmp, trace_server_toml() + renames + telemetry_toml(endpoint))


def _call(trace_id: str) -> CallContext:
    return CallContext(request_id=1, meta={"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"})


async def test_a_rewritten_calls_spans_metrics_and_status_name_the_upstreams_tool(
        tmp_path: Path) -> None:
    server_trace, profile_trace = secrets.token_hex(16), secrets.token_hex(16)
    with otlp_receiver() as (endpoint, received):
        config = load_config(_config(tmp_path, endpoint))
        with anyio.fail_after(60):
            async with Hub(config, load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                done = await hub.call_tool("seen_by_hub", {}, _call(server_trace))
                assert not done.is_error
                done = await hub.call_tool("look", {}, _call(profile_trace), profile="support")
                assert not done.is_error
                calls = hub.status()["recent_calls"]
                assert [(c["tool"], c["upstream_tool"], c["server"]) for c in calls] == [
                    ("seen_by_hub", "trace_seen", "trace"), ("look", "trace_seen", "trace")]
                # A profile's caller sees its own call in its view, by the profile's name.
                assert [c["tool"] for c in hub.status("support")["recent_calls"]] == [
                    "seen_by_hub", "look"]
                answer = await hub.call_tool("hub_status", {})
                assert '"upstream_tool": "trace_seen"' in answer.content[0].text  # type: ignore[union-attr]

                def labelled() -> bool:
                    points = received.metrics.get("mcp.server.operation.duration", [])
                    return {"look", "seen_by_hub"} <= {p.get("gen_ai.tool.name") for p in points}
                await received.wait_for(lambda: len(received.spans_of(server_trace)) >= 2
                                        and len(received.spans_of(profile_trace)) >= 2)
                await received.wait_for(labelled)
        for trace_id, exposed in ((server_trace, "seen_by_hub"), (profile_trace, "look")):
            spans = received.spans_of(trace_id)
            server = next(s for s in spans if s.kind == SERVER)
            client = next(s for s in spans if s.kind == CLIENT)
            assert server.name == f"tools/call {exposed}"
            assert server.attributes["gen_ai.tool.name"] == exposed
            assert server.attributes[UPSTREAM_TOOL] == "trace_seen"
            assert client.attributes["gen_ai.tool.name"] == "trace_seen"
        points = received.metrics["mcp.server.operation.duration"]
        tools = {(p.get("gen_ai.tool.name"), p.get(UPSTREAM_TOOL)) for p in points
                 if p.get("mcp.method.name") == "tools/call"}
        assert {("seen_by_hub", "trace_seen"), ("look", "trace_seen")} <= tools
        assert "_OTHER" not in {t for t, _ in tools}
