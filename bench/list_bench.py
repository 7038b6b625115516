"""tools/list of 1,000 real tools, and what a lister does to everyone else's calls.

One command, from the repository root::

    .venv/bin/python bench/list_bench.py             # about a minute
    .venv/bin/python bench/list_bench.py --scale 0.5

The hub fronts ``bench/catalog_server.py`` (1,000 real tool definitions from the
captured catalogs of 59 published servers) and the echo upstream, with
``tool_search`` off so every tool is listed. Raw clients only (``bench/raw_http.py``
over HTTP, JSON lines over stdio). Measured, side by side in one run:

* ``tools/list`` latency over HTTP from prepared bytes (the fast path), gzip-encoded
  (``Accept-Encoding: gzip``, as httpx and fetch send it; the client decodes each
  answer) and uncompressed, and through the SDK path (the same request with a
  leading space, which the fast path leaves to the SDK), and over stdio; answer
  size per tool, and on the wire;
* another client's ``echo`` call p99 while one client lists in a loop, against
  its quiet p99 (for the fast path with and without gzip, and for the SDK path);
  that client is ``bench/list_caller.py`` in a process of its own, so the
  listers' reading of megabytes of answers does not delay its calls on the
  client side;
* the control: the same answer fetched in a loop, by the same client code, from
  ``bench/static_answer_server.py`` (a server that only writes those bytes, no hub),
  while the other client calls through the hub as before: what the calls lose then is
  this machine's share (two cores, the copies, the client's decoding), a floor that
  the hub's own figures above can approach but not go under; and, as the floor of
  the bursts, 20 clients fetching that answer at once from it;
* 20 sessions re-listing at once right after an upstream change (``add_tool`` on
  the echo server), asking for gzip as real clients do: all answered with the new
  tool, and the calls meanwhile.

Loopback only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ECHO_ARGS, PY, ROOT, base_env, fmt_ms, hub_command, markdown_table, percentile
from bench.http_fast_bench import PIDS, _process, _ready, cpu_seconds
from bench.raw_http import RawSession, Sample

TOOLS = 1000
#: (label, unix start, unix end) of each timed phase, to read the hub's loop lag by phase.
PHASES: list[tuple[str, float, float]] = []
LAGPROBE = ROOT / "bench" / "lagprobe"


def write_config(tmp: Path) -> Path:
    path = tmp / "servers.toml"
    path.write_text("\n".join([
        "[hub]", "startup_timeout = 60", 'log_level = "warning"', f"state_dir = {json.dumps(str(tmp))}", "",
        "[tool_search]", 'mode = "off"', "",
        "[servers.cat]", f"command = {json.dumps(PY)}",
        f"args = {json.dumps([str(ROOT / 'bench' / 'catalog_server.py'), str(TOOLS - 12)])}",
        f"cwd = {json.dumps(str(ROOT))}", "",
        "[servers.echo]", f"command = {json.dumps(PY)}", f"args = {json.dumps(ECHO_ARGS)}",
        f"cwd = {json.dumps(str(ROOT))}", ""]))
    return path


def ms(sample: Sample, q: float) -> float:
    return percentile(sorted(sample.latencies), q) * 1e3


async def timed_lists(session: RawSession, n: int, sample: Sample, *, lead: bytes = b"") -> tuple[int, int]:
    """``n`` lists one after another; the size of the last answer, decoded and on the wire."""
    size = wire = 0
    for _ in range(n):
        body = lead + session.body("tools/list")
        started = time.perf_counter()
        status, headers, data = await session.conns[0].post(session.path, body, session._headers())
        sample.latencies.append(time.perf_counter() - started)
        if status != 200 or b'"result"' not in data:
            sample.errors += 1
        size = len(data)
        wire = int(headers.get(b"content-length", str(size).encode()))
    return size, wire


async def lister_loop(session: RawSession, until: float, lead: bytes, counter: list[int]) -> None:
    while time.perf_counter() < until:
        await session.conns[0].post(session.path, lead + session.body("tools/list"), session._headers())
        counter[0] += 1


class CallerProc:
    """The other client: ``bench/list_caller.py`` in a process of its own."""

    def __init__(self, port: int, tool: str) -> None:
        self.args = [str(ROOT / "bench" / "list_caller.py"), str(port), tool]
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> CallerProc:
        self.proc = await asyncio.create_subprocess_exec(
            PY, *self.args, cwd=ROOT, env=base_env(), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, limit=64 << 20)
        await self._line()  # "ready"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"exit\n")
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()

    async def _line(self) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 60)
        if not line:
            raise RuntimeError("the caller process exited")
        return line

    async def start(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"start\n")
        await self.proc.stdin.drain()

    async def stop(self, sample: Sample) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(b"stop\n")
        sample.latencies.extend(json.loads(await self._line()))


#: ``--idle-load``: the load this process makes (the listers) runs at ``SCHED_IDLE``.
IDLE_LOAD = [False]


@contextlib.contextmanager
def load_priority() -> Iterator[None]:
    """With ``--idle-load``, this thread runs at ``SCHED_IDLE`` meanwhile: the listers then
    use only CPU that the hub, its upstreams and the measured client leave idle, as clients
    on machines of their own would, instead of taking one of this machine's two cores."""
    if not IDLE_LOAD[0]:
        yield
        return
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


async def calls_while(caller: CallerProc, seconds: float, sample: Sample,
                      lister: RawSession | None = None, lead: bytes = b"", label: str = "") -> int:
    counter = [0]
    if lister is not None:
        await lister.reconnect()
    began = time.time()
    await caller.start()
    until = time.perf_counter() + seconds
    if lister is not None:
        with load_priority():
            await lister_loop(lister, until, lead, counter)
    else:
        await asyncio.sleep(seconds)
    await caller.stop(sample)
    PHASES.append((label, began, time.time()))
    return counter[0]


async def stdio_lists(tmp: Path, config: Path, n: int, sample: Sample) -> None:
    with open(tmp / "stdio.log", "w") as errlog:
        proc = await asyncio.create_subprocess_exec(
            PY, *hub_command(config), cwd=ROOT, env=base_env(), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=errlog, limit=64 << 20)
    assert proc.stdin is not None and proc.stdout is not None

    async def ask(rid: int, method: str, params: dict[str, object] | None = None) -> bytes:
        assert proc.stdin is not None and proc.stdout is not None
        msg: dict[str, object] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        marker = f'"id":{rid},'.encode()
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            if not line:
                raise RuntimeError("the stdio hub exited")
            if marker in line[:40] or marker.replace(b":", b": ") in line[:40]:
                return line

    try:
        await ask(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "raw", "version": "1"}})
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for i in range(1, n + 6):
            started = time.perf_counter()
            await ask(i, "tools/list")
            if i > 5:
                sample.latencies.append(time.perf_counter() - started)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 15)


async def listen(session: RawSession, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The session's GET stream, where the hub sends ``notifications/tools/list_changed``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
                 + session._headers() + b"\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n")[0]:
        raise RuntimeError(f"GET stream refused: {head[:100]!r}")
    return reader, writer


async def wait_for(reader: asyncio.StreamReader, marker: bytes, within: float = 60) -> None:
    seen = b""
    async with asyncio.timeout(within):
        while marker not in seen:
            chunk = await reader.read(65536)
            if not chunk:
                raise RuntimeError("the GET stream ended")
            seen = seen[-len(marker):] + chunk


async def burst(sessions: list[RawSession], changer: RawSession, caller: CallerProc,
                name: str, sample: Sample, stream: asyncio.StreamReader,
                spent: list[float]) -> tuple[int, bool]:
    """One change, then 20 re-lists at once; ``spent`` gains (wall s, hub CPU s) of the lists."""
    for s in (*sessions, changer):
        await s.reconnect()
    await changer.request(0, "tools/call", {"name": "echo_add_tool", "arguments": {"name": name}})
    await wait_for(stream, b"notifications/tools/list_changed")

    async def one(s: RawSession) -> bytes:
        return await s.request(0, "tools/list")

    began = time.time()
    await caller.start()
    cpu, started = cpu_seconds(PIDS[changer.conns[0].port], children=False), time.perf_counter()
    with load_priority():
        answers = await asyncio.gather(*(one(s) for s in sessions), return_exceptions=True)
    spent[0] += time.perf_counter() - started
    spent[1] += cpu_seconds(PIDS[changer.conns[0].port], children=False) - cpu
    await caller.stop(sample)
    PHASES.append(("bursts", began, time.time()))
    ok = [a for a in answers if isinstance(a, bytes)]
    return len(ok), all(f"echo_{name}".encode() in a for a in ok)


async def static_burst(fetchers: list[RawSession], caller: CallerProc, sample: Sample) -> None:
    """The no-hub control of a burst: 20 clients fetch the static server's answer at once."""
    for s in fetchers:
        await s.reconnect()
    began = time.time()
    await caller.start()
    with load_priority():
        await asyncio.gather(*(s.conns[0].post(s.path, s.body("tools/list"), s._headers())
                               for s in fetchers))
    await caller.stop(sample)
    PHASES.append((STATIC_BURSTS, began, time.time()))


async def list_latencies(lister: RawSession, zipper: RawSession, pid: int, n: int
                         ) -> tuple[list[list[str]], str]:
    """tools/list from prepared bytes (gzip and not) vs through the SDK path, alternating;
    latency and hub CPU."""
    fast, packed, sdk = Sample(), Sample(), Sample()
    size = wire = 0
    for _ in range(3):  # alternate, so the machine's load favours none
        # Fresh connections first: the hub closes a keep-alive connection idle for 5 s, and
        # 33 lists through the SDK path take about that long.
        await lister.reconnect()
        before = cpu_seconds(pid, children=False)
        size, _ = await timed_lists(lister, n // 3, fast)
        fast.cpu += cpu_seconds(pid, children=False) - before
        await zipper.reconnect()
        before = cpu_seconds(pid, children=False)
        _, wire = await timed_lists(zipper, n // 3, packed)
        packed.cpu += cpu_seconds(pid, children=False) - before
        await lister.reconnect()
        before = cpu_seconds(pid, children=False)
        await timed_lists(lister, n // 3, sdk, lead=b" ")
        sdk.cpu += cpu_seconds(pid, children=False) - before
    listed = json.loads((await lister.request(0, "tools/list")).decode())["result"]["tools"]
    rows = [[f"HTTP, {label}", fmt_ms(ms(sample, 50)), fmt_ms(ms(sample, 99)),
             f"{sample.cpu / len(sample.latencies) * 1e3:.2f}"]
            for label, sample in (("prepared bytes, gzip (fast path; decoded by the client)", packed),
                                  ("prepared bytes, uncompressed (fast path)", fast),
                                  ("SDK path", sdk))]
    return rows, (f"tools listed: {len(listed)}; answer {size} bytes, {size / len(listed):.0f} B per tool; "
                  f"gzip-encoded {wire} bytes, {wire / len(listed):.0f} B per tool ({size / wire:.1f}× smaller)")


STATIC_GZIP = "no hub: the same answer fetched in a loop from a static server (gzip)"
STATIC_FAST = "no hub: the same answer fetched in a loop from a static server (uncompressed)"
STATIC_BURSTS = "no hub: 20 clients fetch the same answer at once from a static server"


@contextlib.asynccontextmanager
async def static_servers(answer: bytes) -> AsyncIterator[tuple[int, int]]:
    """Two ``bench/static_answer_server.py`` processes answering ``answer`` (uncompressed,
    gzip-encoded); their ports."""
    tmp = Path(tempfile.mkdtemp(prefix="list-bench-static-"))
    (tmp / "answer").write_bytes(answer)
    procs: list[asyncio.subprocess.Process] = []
    ports: list[int] = []
    try:
        for flags in ((), ("--gzip",)):
            port_file = tmp / f"port-{len(procs)}"
            procs.append(await asyncio.create_subprocess_exec(
                PY, str(ROOT / "bench" / "static_answer_server.py"), str(tmp / "answer"),
                str(port_file), *flags, cwd=ROOT, env=base_env()))
            async with asyncio.timeout(30):
                while not (port_file.exists() and port_file.read_text().strip().isdigit()):
                    await asyncio.sleep(0.05)
            ports.append(int(port_file.read_text()))
        yield ports[0], ports[1]
    finally:
        for proc in procs:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)


async def http_phases(args: argparse.Namespace, port: int, n: int, out: list[str]) -> dict[str, Any]:
    """Every HTTP measurement against the running hub; the samples by name."""
    lister, changer = (RawSession("127.0.0.1", port) for _ in range(2))
    zipper = RawSession("127.0.0.1", port, gzip=True)
    for s in (lister, changer, zipper):
        await s.open()
    await timed_lists(lister, 3, Sample())
    await timed_lists(zipper, 3, Sample())
    await timed_lists(lister, 3, Sample(), lead=b" ")
    r: dict[str, Any] = {}
    r["rows"], sized = await list_latencies(lister, zipper, PIDS[port], n)
    out.append(sized)
    seconds = 4 * args.scale
    for name in ("quiet", "busy_gzip", "quiet1", "busy_fast", "quiet2", "busy_sdk", "quiet3",
                 "static_gzip", "static_fast", "static_calm", "static_bursts", "bursts", "calm"):
        r[name] = Sample()
    async with CallerProc(port, "echo") as caller:
        await calls_while(caller, seconds, r["quiet"], label="quiet")
        r["lists_gzip"] = await calls_while(caller, seconds, r["busy_gzip"], zipper,
                                            label="a client lists in a loop (fast path, gzip)")
        await calls_while(caller, seconds, r["quiet1"], label="quiet")
        r["lists_fast"] = await calls_while(caller, seconds, r["busy_fast"], lister,
                                            label="a client lists in a loop (fast path, uncompressed)")
        await calls_while(caller, seconds, r["quiet2"], label="quiet")
        r["lists_sdk"] = await calls_while(caller, seconds, r["busy_sdk"], lister, b" ",
                                           label="a client lists in a loop (SDK path)")
        # The control: the same answer's bytes, through the same client code, from a server
        # that does nothing else. What the calls lose then is the machine's share.
        async with static_servers(await lister.request(0, "tools/list")) as (plain, packed):
            await calls_while(caller, seconds, r["quiet3"], label="quiet")
            r["lists_static_gzip"] = await calls_while(
                caller, seconds, r["static_gzip"], RawSession("127.0.0.1", packed, gzip=True),
                label=STATIC_GZIP)
            r["lists_static_fast"] = await calls_while(
                caller, seconds, r["static_fast"], RawSession("127.0.0.1", plain), label=STATIC_FAST)
            # And the bursts' floor: 20 clients fetching that answer at once, nothing to prepare.
            fetchers = [RawSession("127.0.0.1", plain if args.no_gzip_bursts else packed,
                                   gzip=not args.no_gzip_bursts) for _ in range(20)]
            for _ in range(args.bursts):
                await calls_while(caller, seconds / 4, r["static_calm"], label="quiet")
                await static_burst(fetchers, caller, r["static_bursts"])
        sessions = [RawSession("127.0.0.1", port, gzip=not args.no_gzip_bursts) for _ in range(20)]
        for s in sessions:
            await s.open()
        r["answered"], r["fresh"], r["spent"] = 0, True, [0.0, 0.0]
        stream, stream_writer = await listen(changer, port)
        for i in range(args.bursts):
            await calls_while(caller, seconds / 4, r["calm"], label="between bursts")
            got, new = await burst(sessions, changer, caller, f"added_{i}", r["bursts"], stream,
                                   r["spent"])
            r["answered"] += got
            r["fresh"] = r["fresh"] and new
        stream_writer.close()
    return r


def _restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def lag_table(lag_file: Path, pid: int) -> str:
    """The hub's event-loop lag (the 2 ms probe of bench/lagprobe) per phase."""
    path = lag_file.with_name(f"{lag_file.name}.{pid}")
    if not path.exists():
        return "hub event-loop lag: no probe data (uvloop missing?)"
    points = [tuple(map(float, line.split())) for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for label in dict.fromkeys(label for label, _, _ in PHASES):
        inside = [p for p in points if any(lab == label and t0 <= p[0] <= t1 for lab, t0, t1 in PHASES)]
        lags = sorted(p[1] for p in inside)
        held = sorted(p[2] for p in inside if len(p) > 2)  # an older probe writes no CPU column
        if lags:
            rows.append([label, fmt_ms(percentile(lags, 50)), fmt_ms(percentile(lags, 99)),
                         fmt_ms(lags[-1]), fmt_ms(percentile(held, 99)) if held else "—",
                         fmt_ms(held[-1]) if held else "—", str(len(lags))])
    return markdown_table(["hub event-loop lag (2 ms timer)", "p50 ms", "p99 ms", "max ms",
                           "loop CPU p99 ms", "loop CPU max ms", "samples"],
                          rows) + "\n\n" + gc_table(lag_file, pid)


def gc_table(lag_file: Path, pid: int) -> str:
    """The hub's garbage collections per phase: full ones, younger ones that took over 1 ms of
    wall time, and the settles of mcp_hub.plumbing.settled_heap; in CPU time of the loop's thread."""
    path = lag_file.with_name(f"{lag_file.name}.gc.{pid}")
    if not path.exists():
        return "hub garbage collections: no probe data"
    points = [line.split() for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for label in dict.fromkeys(label for label, _, _ in PHASES):
        # (generation, CPU ms where recorded else wall ms, who ran it)
        inside = [(int(p[1]), float(p[4] if len(p) > 4 else p[2]), p[3] if len(p) > 3 else "auto")
                  for p in points if any(lab == label and t0 <= float(p[0]) <= t1 for lab, t0, t1 in PHASES)]
        full = [took for gen, took, by in inside if gen == 2 and by == "auto"]
        ours = [took for gen, took, by in inside if by == "hub"]
        young = [took for gen, took, by in inside if gen < 2 and by == "auto"]
        rows.append([label, str(len(full)), fmt_ms(max(full, default=0.0)), str(len(young)),
                     fmt_ms(max(young, default=0.0)), str(len(ours)), fmt_ms(max(ours, default=0.0))])
    return markdown_table(["hub garbage collections (CPU ms)", "full", "longest full ms",
                           "younger > 1 ms wall", "longest younger ms", "settles", "longest settle ms"],
                          rows)


async def run(args: argparse.Namespace) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="list-bench-"))
    config = write_config(tmp)
    out: list[str] = [f"logs in {tmp}"]
    from bench.common import free_port
    port = free_port()
    n = max(10, int(100 * args.scale))
    lag_file = tmp / "loop-lag"
    saved = {k: os.environ.get(k) for k in ("MCP_HUB_BENCH_LAG_FILE", "PYTHONPATH")}
    os.environ["MCP_HUB_BENCH_LAG_FILE"] = str(lag_file)
    os.environ["PYTHONPATH"] = str(LAGPROBE) + os.pathsep + (saved["PYTHONPATH"] or "")
    try:
        async with _process(hub_command(config, "--transport", "http", "--port", str(port)), port,
                            tmp / "hub.log", ready=lambda: _ready(port)):
            _restore(saved)  # the hub has started: nothing else gets the probe
            hub_pid = PIDS[port]
            r = await http_phases(args, port, n, out)
    finally:
        _restore(saved)
    stdio = Sample()
    await stdio_lists(tmp, config, n, stdio)
    rows = r["rows"]
    rows.append(["stdio, prepared bytes (fast path)", fmt_ms(ms(stdio, 50)), fmt_ms(ms(stdio, 99)), "—"])
    out.append(markdown_table(["tools/list of 1,000 real tools", "p50 ms", "p99 ms",
                               "hub CPU ms per list"], rows))
    out.append(calls_table(args, r))
    spent = r["spent"]
    out.append(f"bursts: {r['answered']}/{20 * args.bursts} lists answered, every one with the new tool: "
               f"{r['fresh']}; a burst's 20 lists took {spent[0] / args.bursts * 1e3:.0f} ms of wall time and "
               f"{spent[1] / args.bursts * 1e3:.0f} ms of hub CPU (mean of {args.bursts})")
    (tmp / "phases.json").write_text(json.dumps(PHASES))  # to read the probe's files by phase later
    out.append(lag_table(lag_file, hub_pid))
    return out


def calls_table(args: argparse.Namespace, r: dict[str, Any]) -> str:
    quiet, quiet1, quiet2, calm, bursts = r["quiet"], r["quiet1"], r["quiet2"], r["calm"], r["bursts"]
    busy_gzip, busy_fast, busy_sdk = r["busy_gzip"], r["busy_fast"], r["busy_sdk"]
    calls_rows = [
        ["quiet", fmt_ms(ms(quiet, 50)), fmt_ms(ms(quiet, 99)), "1.00×", "—"],
        ["a client lists in a loop (fast path, gzip)", fmt_ms(ms(busy_gzip, 50)),
         fmt_ms(ms(busy_gzip, 99)), f"{ms(busy_gzip, 99) / ms(quiet, 99):.2f}×", str(r["lists_gzip"])],
        ["quiet again", fmt_ms(ms(quiet1, 50)), fmt_ms(ms(quiet1, 99)), "—", "—"],
        ["a client lists in a loop (fast path, uncompressed)", fmt_ms(ms(busy_fast, 50)),
         fmt_ms(ms(busy_fast, 99)), f"{ms(busy_fast, 99) / ms(quiet1, 99):.2f}×", str(r["lists_fast"])],
        ["quiet again", fmt_ms(ms(quiet2, 50)), fmt_ms(ms(quiet2, 99)), "—", "—"],
        ["a client lists in a loop (SDK path)", fmt_ms(ms(busy_sdk, 50)), fmt_ms(ms(busy_sdk, 99)),
         f"{ms(busy_sdk, 99) / ms(quiet2, 99):.2f}×", str(r["lists_sdk"])],
        ["quiet again", fmt_ms(ms(r["quiet3"], 50)), fmt_ms(ms(r["quiet3"], 99)), "—", "—"],
        *([label, fmt_ms(ms(r[key], 50)), fmt_ms(ms(r[key], 99)),
           f"{ms(r[key], 99) / ms(r['quiet3'], 99):.2f}×", str(r[f"lists_{key}"])]
          for key, label in (("static_gzip", STATIC_GZIP), ("static_fast", STATIC_FAST))),
        ["calls between those", fmt_ms(ms(r["static_calm"], 50)), fmt_ms(ms(r["static_calm"], 99)),
         "1.00×", "—"],
        [f"{STATIC_BURSTS} ({args.bursts}×{' uncompressed' if args.no_gzip_bursts else ', gzip'})",
         fmt_ms(ms(r["static_bursts"], 50)), fmt_ms(ms(r["static_bursts"], 99)),
         f"{ms(r['static_bursts'], 99) / ms(r['static_calm'], 99):.2f}×", "—"],
        ["calls between bursts", fmt_ms(ms(calm, 50)), fmt_ms(ms(calm, 99)), "1.00×", "—"],
        [f"calls during {args.bursts} bursts of 20 re-lists after a change"
         f"{' (uncompressed)' if args.no_gzip_bursts else ' (gzip)'}", fmt_ms(ms(bursts, 50)),
         fmt_ms(ms(bursts, 99)), f"{ms(bursts, 99) / ms(calm, 99):.2f}×", str(r["answered"])],
    ]
    return markdown_table(["another client's echo calls (own process)", "p50 ms", "p99 ms",
                           "p99 vs quiet", "lists answered"], calls_rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies counts and durations")
    parser.add_argument("--bursts", type=int, default=5)
    parser.add_argument("--no-gzip-bursts", action="store_true",
                        help="the 20 re-listing sessions do not ask for gzip")
    parser.add_argument("--idle-load", action="store_true",
                        help="the listers run at SCHED_IDLE (Linux), as if on machines of their own")
    args = parser.parse_args(argv)
    IDLE_LOAD[0] = args.idle_load
    load = os.getloadavg()
    started = time.strftime("%H:%M:%S", time.gmtime())
    lines = asyncio.run(run(args))
    print(f"{started} UTC, load average {load[0]:.1f} at start, {os.cpu_count()} cores (shared machine)")
    print("\n\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
