"""What telemetry adds to the hub's own work per tool call, in-process, off vs on.

One command, from the repository root::

    .venv/bin/python bench/telemetry_bench.py [--calls 4000] [--rounds 6]

Two hubs in this process, alike except for ``[telemetry]``: one off, one on at
sample ratio 1.0 exporting to an OTLP/HTTP receiver that only counts
(tests/otlp_receiver.py with ``decode=False``). The receiver runs in a process
of its own, as a collector would, so its work on the export requests is not
counted as the hub's; ``--receiver-thread`` puts it in this process instead.
Each calls the same tool through :meth:`Hub.call_tool`, the path every
transport shares, without any transport around it, so the difference is
what telemetry costs the hub and nothing else:

* ``local``    — a trivial tool in the hub's registry (the server span only);
* ``upstream`` — the echo fixture's ``echo`` over stdio (server span, client
  span, trace context into the upstream request's ``_meta``). The client sends
  no trace context, so only the hub that traces sends the upstream one;
* ``upstream, traced client`` — the same, with a ``traceparent`` in the call's
  ``_meta`` as a traced agent sends it. The hub with telemetry off passes it on
  unchanged, so the upstream receives a trace context on both sides and the
  difference is the hub's alone.

The calls alternate between off and on in chunks, so machine load hits both
alike. The benchmark runs on the event loop the hub serves on (uvloop;
``--asyncio`` for asyncio's own). Each hub has its own echo upstream process (told apart by a
``BENCH_SIDE`` variable), so the upstream's share is measured too. The report
gives, per call:

* wall-clock p50 and p99 — the headline: the whole call, upstream included;
* the p50 of the CPU time the event-loop thread spent (``time.thread_time``:
  what the call path pays, much less disturbed by other processes than wall
  time);
* the hub process's CPU time per call (``time.process_time`` over the chunks),
  and the part of it spent outside the calls' own event-loop time (the span
  exporter's thread, the metric reader, collections those threads ran);
* the upstream process's CPU time per call (all its threads, from
  ``/proc/<pid>/task/*/schedstat``): what the upstream itself does with the
  trace context it receives (an upstream on the ``mcp`` SDK parses it with
  OpenTelemetry's propagator in its default server middleware);
* garbage collections (any generation) per 1,000 calls.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp.types import CallToolResult, TextContent

from bench.common import hub_config, markdown_table
from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from tests.otlp_receiver import otlp_receiver


async def _noop(args: dict[str, Any] | None = None, **_: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(text="ok")])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Samples:
    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.process_cpu = 0.0
        self.upstream_cpu = 0.0
        self.collections = 0
        self.calls = 0


#: Garbage collections so far (any generation), counted by a ``gc.callbacks`` hook.
_COLLECTIONS = [0]


def _count_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop":
        _COLLECTIONS[0] += 1


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from ``/proc/<pid>/task/*/children``)."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for task in Path(f"/proc/{pid}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                kids = [int(k) for k in task.read_text().split()]
                found += kids
                todo += kids
    return found


def upstream_pid(side: str) -> int | None:
    """The pid of the echo upstream started with ``BENCH_SIDE=side`` (None off Linux)."""
    for pid in _descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if f"BENCH_SIDE={side}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                return pid
    return None


def cpu_seconds(pid: int | None) -> float:
    """CPU time of all threads of ``pid`` in seconds, to the nanosecond (schedstat), or 0."""
    if pid is None:
        return 0.0
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[0])
    return total / 1e9


#: The ``traceparent`` a traced client sends (``upstream, traced client``).
CLIENT_CONTEXT = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}


async def _chunk(hub: Hub, tool: str, calls: int, out: Samples, upstream: int | None = None,
                 meta: dict[str, str] | None = None) -> None:
    upstream_started = cpu_seconds(upstream)
    collections = _COLLECTIONS[0]
    process_started = time.process_time()
    for i in range(calls):
        call = CallContext(tool_name=tool, request_id=i, meta=meta)
        started, cpu_started = time.perf_counter(), time.thread_time()
        await hub.call_tool(tool, {"text": "hello"}, call)
        out.cpu.append((time.thread_time() - cpu_started) * 1e6)
        out.wall.append((time.perf_counter() - started) * 1e6)
    out.process_cpu += time.process_time() - process_started
    out.upstream_cpu += cpu_seconds(upstream) - upstream_started
    out.collections += _COLLECTIONS[0] - collections
    out.calls += calls


_RECEIVER = """
import sys
from tests.otlp_receiver import otlp_receiver
with otlp_receiver(decode=False) as (sink, received):
    print(sink, flush=True)
    sys.stdin.read()
    print(f"OTLP receiver got: {received.counts}", file=sys.stderr)
"""


@contextlib.contextmanager
def _receiver(in_thread: bool) -> Iterator[str]:
    """The OTLP/HTTP endpoint of a counting receiver: a child process, or a thread here."""
    if in_thread:
        with otlp_receiver(decode=False) as (sink, received):
            yield sink
        print(f"OTLP receiver got: {received.counts}", file=sys.stderr)
        return
    root = Path(__file__).resolve().parent.parent
    child = subprocess.Popen([sys.executable, "-c", _RECEIVER], cwd=root, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        yield child.stdout.readline().strip()
    finally:
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=10)


async def run(args: argparse.Namespace) -> list[list[str]]:
    tmp = Path(tempfile.mkdtemp(prefix="mcp-hub-telemetry-bench-"))
    # The same echo upstream on both sides; BENCH_SIDE only tells the two processes apart.
    off_path = hub_config(tmp / "off.toml", {"echo": {"BENCH_SIDE": "off"}})
    rows: list[list[str]] = []
    with _receiver(args.receiver_thread) as sink:
        on_path = hub_config(tmp / "on.toml", {"echo": {"BENCH_SIDE": "on"}})
        on_path.write_text(on_path.read_text() + f'\n[telemetry]\notlp_endpoint = "{sink}"\n'
                           "sample_ratio = 1.0\n")
        async with (Hub(load_config(off_path), load_plugin_modules=False) as off,
                    Hub(load_config(on_path), load_plugin_modules=False) as on):
            assert not off.telemetry.enabled and on.telemetry.enabled
            for hub in (off, on):
                hub.registry.register("bench_noop", "bench", {"name": "bench_noop",
                                      "parameters": {"type": "object"}}, _noop)
                await hub.wait_ready(30)
            hubs = {"off": (off, upstream_pid("off")), "on": (on, upstream_pid("on"))}
            for label, tool, meta in (("local", "bench_noop", None),
                                      ("upstream", "echo", None),
                                      ("upstream, traced client", "echo", CLIENT_CONTEXT)):
                rows.append(await _compare(args, label, tool, hubs, meta))
    return rows


async def _compare(args: argparse.Namespace, label: str, tool: str,
                   hubs: dict[str, tuple[Hub, int | None]],
                   meta: dict[str, str] | None = None) -> list[str]:
    """One row: ``tool`` called through both hubs in alternating chunks."""
    samples = {"off": Samples(), "on": Samples()}
    for hub, _ in hubs.values():  # warm-up
        await _chunk(hub, tool, 200, Samples(), meta=meta)
    per_chunk = max(1, args.calls // args.rounds)
    for r in range(args.rounds):
        for name in ("off", "on") if r % 2 == 0 else ("on", "off"):
            hub, pid = hubs[name]
            await _chunk(hub, tool, per_chunk, samples[name], pid, meta)
    wall = {k: statistics.median(v.wall) for k, v in samples.items()}
    p99 = {k: _pct(v.wall, 0.99) for k, v in samples.items()}
    cpu = {k: statistics.median(v.cpu) for k, v in samples.items()}
    proc = {k: v.process_cpu / v.calls * 1e6 for k, v in samples.items()}
    # The hub's CPU outside the calls' own event-loop time: the exporter thread, the
    # metric reader, and collections that other threads triggered.
    rest = {k: proc[k] - sum(v.cpu) / v.calls for k, v in samples.items()}
    up = {k: v.upstream_cpu / v.calls * 1e6 for k, v in samples.items()}
    gcs = {k: v.collections / v.calls * 1000 for k, v in samples.items()}
    upstream = (f"{up['off']:.1f} / {up['on']:.1f} ({up['on'] - up['off']:+.1f})"
                if label != "local" else "—")
    return [label, f"{wall['off']:.1f}", f"{wall['on']:.1f}", f"{wall['on'] - wall['off']:+.1f}",
            f"{p99['off']:.0f} / {p99['on']:.0f}", f"{cpu['on'] - cpu['off']:+.1f}",
            f"{proc['off']:.1f} / {proc['on']:.1f} ({proc['on'] - proc['off']:+.1f})",
            f"{rest['on'] - rest['off']:+.1f}", upstream,
            f"{gcs['off']:.0f} / {gcs['on']:.0f}", str(samples["on"].calls)]


def _empty() -> None:
    return None


def off_path_ns(loops: int = 200_000) -> tuple[float, float]:
    """Nanoseconds the call path spends on telemetry when it is off (the hub's
    ``with self.telemetry.serve(name, call) as traced: ... traced.done(result)``),
    and, for scale on a loaded machine, four calls of an empty function."""
    from mcp_hub.telemetry import OFF

    call = CallContext(tool_name="echo")
    result = CallToolResult(content=[])
    best = scale = float("inf")
    for _ in range(5):
        started = time.perf_counter_ns()
        for _ in range(loops):
            with OFF.serve("echo", call) as traced:
                traced.done(result)
        best = min(best, (time.perf_counter_ns() - started) / loops)
        started = time.perf_counter_ns()
        for _ in range(loops):
            _empty()
            _empty()
            _empty()
            _empty()
        scale = min(scale, (time.perf_counter_ns() - started) / loops)
    return best, scale


def off_request_ns(loops: int = 200_000) -> float:
    """Nanoseconds a fast-path list pays for its telemetry hook when telemetry is off."""
    from mcp_hub.telemetry import OFF

    best = float("inf")
    for _ in range(5):
        started = time.perf_counter_ns()
        for i in range(loops):
            with OFF.request("tools/list", None, request_id=i, meta=None, headers=None,
                             transport="tcp", protocol_version="2025-11-25", session_id="s"):
                pass
        best = min(best, (time.perf_counter_ns() - started) / loops)
    return best


def on_path_us(loops: int = 20_000) -> tuple[float, float]:
    """Microseconds of the hub's own telemetry work per call, isolated from the rest
    (best of 5, minus the same loop without telemetry; spans go nowhere, durations are
    queued): a ``tools/call`` SERVER
    span alone, and with the CLIENT span of its upstream request and the ``_meta``
    traceparent it writes."""
    from mcp.types import CallToolRequest, CallToolRequestParams
    from opentelemetry.sdk.metrics import MeterProvider

    from mcp_hub.telemetry import Telemetry, client_span
    from mcp_hub.telemetry.record import Sampler

    class Sink(list[Any]):
        def add(self, rec: Any) -> None:
            return None

        def wake(self) -> None:
            return None

    tel = Telemetry(Sampler(1.0), MeterProvider().get_meter("bench"), lambda n: True, spans=Sink())
    result = CallToolResult(content=[])

    def server(call: CallContext, request: Any) -> None:
        with tel.serve("echo", call) as traced:
            traced.done(result)

    def both(call: CallContext, request: Any) -> None:
        with tel.serve("echo", call) as traced:
            with client_span(call, "echo", request, "stdio") as upstream:
                upstream.done(result)
            traced.done(result)

    def neither(call: CallContext, request: Any) -> None:
        return None

    best = {neither: float("inf"), server: float("inf"), both: float("inf")}
    for _ in range(5):
        for fn in best:  # alternating, so load changes hit all three alike
            tel.drain()
            started = time.perf_counter()
            for i in range(loops):
                fn(CallContext(tool_name="echo", request_id=i),
                   CallToolRequest(params=CallToolRequestParams(name="echo", arguments={})))
            best[fn] = min(best[fn], (time.perf_counter() - started) / loops * 1e6)
    return best[server] - best[neither], best[both] - best[neither]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=4000, help="measured calls per target and side")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--receiver-thread", action="store_true",
                        help="run the OTLP receiver as a thread of this process, not a child process")
    parser.add_argument("--asyncio", action="store_true",
                        help="asyncio's own event loop instead of uvloop (which the hub serves on)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    gc.callbacks.append(_count_collection)
    # The event loop the hub serves on (uvloop where installed), unless --asyncio.
    rows = anyio.run(run, args, backend_options={"use_uvloop": not args.asyncio})
    load = os.getloadavg()
    print(f"# telemetry cost per call, in-process ({time.strftime('%Y-%m-%d %H:%M')}; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f}; "
          f"run took {time.perf_counter() - started:.0f} s)\n")
    print(markdown_table(["tool", "wall p50 off µs", "wall p50 on µs", "added wall p50 µs",
                          "wall p99 off / on µs", "added loop CPU p50 µs",
                          "hub CPU µs/call off / on (added)", "of it off the loop, added µs",
                          "upstream CPU µs/call off / on (added)",
                          "GCs per 1000 calls off / on", "calls per side"], rows))
    off, scale = off_path_ns()
    print(f"\nTelemetry off, per call: {off:.0f} ns (best of 5 × 200,000 no-op spans); "
          f"four calls of an empty function in the same run: {scale:.0f} ns")
    print(f"Telemetry off, per list on a fast path: {off_request_ns():.0f} ns (its span hook)")
    alone, both = on_path_us()
    print(f"Telemetry on, the hub's own work per call (isolated, best of 5 × 20,000): "
          f"server span {alone:.1f} µs; server span + upstream client span + _meta "
          f"traceparent {both:.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
