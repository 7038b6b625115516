"""The hub's own duration histograms agree with the SDK's and reach the metric export."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

try:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
except ImportError as exc:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"needs the otel extra (pip install -e '.[dev]'): {exc}", allow_module_level=True)

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from mcp_hub.telemetry import durations
from mcp_hub.telemetry.durations import DurationHistogram, with_durations
from mcp_hub.telemetry.providers import DURATION_BUCKETS
from tests.hubtest import echo_server_toml, write_config


def _sdk_points(values: list[tuple[float, dict[str, str]]]) -> dict[frozenset[Any], Any]:
    reader = InMemoryMetricReader()
    sdk = MeterProvider(metric_readers=[reader]).get_meter("t").create_histogram(
        "d", unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
    for value, labels in values:
        sdk.record(value, labels)
    data = reader.get_metrics_data()
    assert data is not None
    metric = data.resource_metrics[0].scope_metrics[0].metrics[0]
    return {frozenset(p.attributes.items()): p for p in metric.data.data_points}


def test_points_match_the_sdk_histogram() -> None:
    rng = random.Random(7)
    server = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo"}
    listing = {"mcp.method.name": "tools/list"}
    # Boundaries themselves (they count in the bucket below), zero, and the overflow bucket.
    values = [(b, server) for b in DURATION_BUCKETS] + [(0.0, listing), (1000.0, server)]
    values += [(rng.expovariate(20), rng.choice((server, listing))) for _ in range(500)]
    ours = DurationHistogram("d", "s", "help", DURATION_BUCKETS)
    for value, labels in values:
        ours.record(value, labels)
    mine = {frozenset(p.attributes.items()): p for p in ours.data_points(1, delta=False)}
    theirs = _sdk_points(values)
    assert mine.keys() == theirs.keys()
    for key, point in mine.items():
        sdk = theirs[key]
        assert list(point.bucket_counts) == list(sdk.bucket_counts)
        assert list(point.explicit_bounds) == list(sdk.explicit_bounds)
        assert (point.count, point.min, point.max) == (sdk.count, sdk.min, sdk.max)
        assert point.sum == pytest.approx(sdk.sum)


def test_equal_label_dicts_share_a_point_and_cardinality_is_bounded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(durations, "MAX_POINTS", 3)
    hist = DurationHistogram("d", "s", "help", (0.1, 1.0))
    for _ in range(2):  # a fresh dict each time, equal content
        hist.record(0.05, {"tool": "a"})
    for name in "bcde":
        hist.record(0.5, {"tool": name})
    points = {tuple(sorted(p.attributes.items())): p for p in hist.data_points(1, delta=False)}
    assert points[(("tool", "a"),)].count == 2
    # Three label sets; the fourth and fifth land on the one overflow point.
    assert len(points) == 4
    assert points[(("otel.metric.overflow", True),)].count == 2


def test_cumulative_keeps_counting_and_delta_starts_anew() -> None:
    hist = DurationHistogram("d", "s", "help", (0.1,))
    labels = {"m": "x"}
    hist.record(0.05, labels)
    first = hist.data_points(10, delta=False)
    hist.record(0.5, labels)
    second = hist.data_points(20, delta=False)
    assert [p.count for p in first] == [1] and [p.count for p in second] == [2]
    assert second[0].start_time_unix_nano == first[0].start_time_unix_nano
    assert [p.count for p in hist.data_points(30, delta=True)] == [2]
    assert hist.data_points(40, delta=True) == []  # nothing since: no point
    hist.record(0.5, labels)
    (point,) = hist.data_points(50, delta=True)
    assert (point.count, point.start_time_unix_nano, list(point.bucket_counts)) == (1, 40, [0, 1])


def test_the_points_join_the_collection_in_the_hub_scope() -> None:
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("mcp_hub", "1")
    meter.create_counter("other").add(1)
    hist = DurationHistogram("mcp.server.operation.duration", "s", "help", DURATION_BUCKETS)
    hist.record(0.02, {"mcp.method.name": "ping"})
    scope = InstrumentationScope("mcp_hub", "1")
    data = with_durations(reader.get_metrics_data(), [hist], Resource.create({}), scope, False)
    (sm,) = data.resource_metrics[0].scope_metrics
    assert [m.name for m in sm.metrics] == ["other", "mcp.server.operation.duration"]
    (point,) = sm.metrics[1].data.data_points
    assert point.count == 1 and point.attributes == {"mcp.method.name": "ping"}
    # A collection with nothing in it gets a resource and the scope of its own.
    hist.record(0.02, {"mcp.method.name": "ping"})
    empty = with_durations(None, [hist], Resource.create({"service.name": "hub"}), scope, False)
    (rm,) = empty.resource_metrics
    assert rm.resource.attributes["service.name"] == "hub"
    assert rm.scope_metrics[0].scope.name == "mcp_hub"
    assert rm.scope_metrics[0].metrics[0].data.data_points[0].count == 2


@pytest.mark.anyio
async def test_a_collector_receives_every_call_in_the_histograms(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls through a hub with telemetry on: the points the receiver decodes count
    each call once, under its labels, tool errors apart."""
    from tests.otlp_receiver import otlp_receiver

    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with otlp_receiver() as (endpoint, received):
        body = (echo_server_toml("echo")
                + f'\n[telemetry]\notlp_endpoint = "{endpoint}"\nmetric_interval = 0.2\n')
        config = load_config(write_config(tmp_path, body))
        with anyio.fail_after(60):
            async with Hub(config, load_plugin_modules=False) as hub:
                await hub.wait_ready(20)
                for i in range(7):
                    await hub.call_tool("echo_echo", {"text": "hi"}, CallContext(request_id=i))
                await hub.call_tool("echo_fail", {}, CallContext(request_id=99))
            # The hub's exit flushes the last collection.
    last: dict[tuple[str, frozenset[Any]], tuple[int, list[int]]] = {}
    for name, points in received.histograms.items():
        for attrs, count, buckets in points:  # cumulative: the last point of a series counts
            last[(name, frozenset(attrs.items()))] = (count, buckets)

    def counts(name: str, tool: str, error: str | None = None) -> list[int]:
        return [count for (n, attrs), (count, buckets) in last.items()
                if n == name and ("gen_ai.tool.name", tool) in attrs
                and dict(attrs).get("error.type") == error and sum(buckets) == count]

    assert counts("mcp.server.operation.duration", "echo_echo") == [7]
    assert counts("mcp.server.operation.duration", "echo_fail", "tool_error") == [1]
    assert counts("mcp.client.operation.duration", "echo") == [7]
