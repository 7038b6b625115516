"""Streamable HTTP side by side: the hub vs the SDK's own server vs FastMCP's proxy.

One command, from the repository root::

    .venv/bin/python bench/http_fast_bench.py            # about a minute
    .venv/bin/python bench/http_fast_bench.py --scale 0.5

Targets, every one in front of the same echo upstream (``tests.fixtures.echo_server``)
and spoken to with the lean raw-HTTP client of ``bench/raw_http.py``:

* ``direct``  — the echo server itself over Streamable HTTP (the SDK's own server);
* ``mcp-hub`` — ``mcp-hub serve --transport http``, the echo server as a stdio upstream;
* ``fastmcp`` — FastMCP 4.1.6's proxy (``bench/peers/fastmcp_proxy.py``) over HTTP,
  the echo server as its stdio upstream (installed by ``bench/peers/run.py``; skipped
  if ``bench/peers/.venv-fastmcp`` is missing).

Load: 16 sessions × 4 requests in flight (one keep-alive connection per slot),
``tools/call echo`` back to back; then one call at a time for the added latency.
The measured time is split into chunks that alternate between the targets, so
the machine's background load favours none of them. Loopback only, bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ECHO_ARGS,
    PY,
    ROOT,
    base_env,
    child_pids,
    fmt_ms,
    fmt_ratio,
    free_port,
    hub_command,
    hub_config,
    markdown_table,
    percentile,
)
from bench.raw_http import RawSession, Sample

#: The pid of the server listening on each port.
PIDS: dict[int, int] = {}


def cpu_seconds(pid: int, children: bool = True) -> float:
    """CPU time (user + system) of ``pid`` and its children, from /proc (Linux only)."""
    total = 0.0
    for p in (pid, *(child_pids(pid) if children else ())):
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


FASTMCP_PY = ROOT / "bench" / "peers" / ".venv-fastmcp" / "bin" / "python"
SESSIONS, IN_FLIGHT = 16, 4
#: ``--identity``: the hubs take this named token, and an access rule maps it to a profile
#: holding the echo server, so every call pays for the identity's checks. The other targets
#: ignore the header.
TOKEN: str | None = None
IDENTITY_CONFIG = """
[profiles.bench]
toolsets = ["mcp-echo"]

[[access]]
match = "token:bench"
profile = "bench"
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def _wait_http(port: int, proc: subprocess.Popen[bytes], within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited early with code {proc.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise TimeoutError(f"nothing listening on {port}")


@asynccontextmanager
async def _process(argv: list[str], port: int, log_path: Path, py: str = PY,
                   ready: Callable[[], bool] | None = None, cwd: Path = ROOT) -> AsyncIterator[int]:
    """Start a server; yields its port (its pid is in :data:`PIDS` under that port)."""
    with open(log_path, "w") as err:
        proc = subprocess.Popen([py, *argv], cwd=cwd, env=base_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        PIDS[port] = proc.pid
        await _wait_http(port, proc)
        if ready is not None:
            for _ in range(600):
                if ready():
                    break
                await asyncio.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def direct(tmp: Path) -> AbstractAsyncContextManager[int]:
    port = free_port()
    return _process([*ECHO_ARGS, "--transport", "http", "--port", str(port)], port, tmp / "direct.log")


def hub(tmp: Path, tree: Path = ROOT, label: str = "hub",
        http: str = "") -> AbstractAsyncContextManager[int]:
    """The hub of ``tree`` (this checkout, or the one of ``--base-tree``); ``http``: lines
    of its ``[hub.http]`` section."""
    port = free_port()
    config = hub_config(tmp / f"{label}.toml", {"echo": {}})
    # Its own state dir: the default one is shared by every hub run on the machine.
    state = tmp / f"{label}-state"
    text = config.read_text().replace("[hub]\n", f"[hub]\nstate_dir = {json.dumps(str(state))}\n", 1)
    if TOKEN is not None:
        http += f"auth_tokens = [{{ name = \"bench\", token = \"{TOKEN}\" }}]\n"
    if http:
        text = text.replace("\n\n", f"\n\n[hub.http]\n{http}\n", 1)
    if TOKEN is not None:
        text += IDENTITY_CONFIG
    config.write_text(text)
    return _process(hub_command(config, "--transport", "http", "--port", str(port)), port,
                    tmp / f"{label}.log", ready=lambda: _ready(port), cwd=tree)


def _ready(port: int) -> bool:
    import urllib.request
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def fastmcp(tmp: Path) -> AbstractAsyncContextManager[int]:
    port = free_port()
    config = tmp / "fastmcp.json"
    config.write_text(json.dumps({"mcpServers": {"echo": {
        "command": PY, "args": ECHO_ARGS, "cwd": str(ROOT), "env": base_env()}}}))
    return _process([str(ROOT / "bench" / "peers" / "fastmcp_proxy.py"), str(config), "http", str(port)],
                    port, tmp / "fastmcp.log", py=str(FASTMCP_PY))


TARGETS = {"direct": direct, "mcp-hub": hub, "fastmcp": fastmcp}


async def _sessions(port: int, tool: str) -> list[RawSession]:
    sessions = [RawSession("127.0.0.1", port, width=IN_FLIGHT, token=TOKEN) for _ in range(SESSIONS)]
    for s in sessions:
        await s.open()
    await sessions[0].request(0, "tools/call", {"name": tool, "arguments": {"text": "warm"}})
    return sessions


async def _find_echo(session: RawSession) -> str:
    body = await session.request(0, "tools/list")
    text = body.decode()
    data = json.loads(text[text.index("{"):text.rindex("}") + 1])
    names = [t["name"] for t in data["result"]["tools"]]
    return str(next(n for n in names if n.split("_")[-1] == "echo"))


async def _chunk(sessions: list[RawSession], tool: str, seconds: float, sample: Sample,
                 width: int) -> None:
    for s in sessions[:width]:
        await s.reconnect()
    pid = PIDS.get(sessions[0].conns[0].port)
    cpu_before = cpu_seconds(pid) if pid else 0.0
    own_before = cpu_seconds(pid, children=False) if pid else 0.0
    calls_before = len(sample.latencies)
    until = time.perf_counter() + seconds
    params = {"name": tool, "arguments": {"text": "hello"}}
    started = time.perf_counter()
    await asyncio.gather(*(s.loop(c, "tools/call", params, until, sample)
                           for s in sessions[:width] for c in range(IN_FLIGHT if width > 1 else 1)))
    sample.seconds += time.perf_counter() - started
    if pid:
        sample.cpu += cpu_seconds(pid) - cpu_before
        sample.cpu_own += cpu_seconds(pid, children=False) - own_before
        sample.cpu_calls += len(sample.latencies) - calls_before


async def run(args: argparse.Namespace) -> dict[str, dict[str, Sample]]:
    tmp = Path(tempfile.mkdtemp(prefix="http-fast-bench-"))
    log(f"logs in {tmp}")
    names = [n for n in args.targets if n != "fastmcp" or FASTMCP_PY.exists()]
    results: dict[str, dict[str, Sample]] = {n: {"load": Sample(), "one": Sample()} for n in names}
    async with contextlib_exit_stack() as stack:
        ports = {n: await stack.enter_async_context(TARGETS[n](tmp)) for n in names}
        tools: dict[str, str] = {}
        open_sessions: dict[str, list[RawSession]] = {}
        for n in names:
            probe = RawSession("127.0.0.1", ports[n], token=TOKEN)
            await probe.open()
            tools[n] = await _find_echo(probe)
            await probe.close()
            open_sessions[n] = await _sessions(ports[n], tools[n])
            log(f"{n}: port {ports[n]}, tool {tools[n]}")
        for n in names:  # warm-up
            await _chunk(open_sessions[n], tools[n], 1.0 * args.scale, Sample(), SESSIONS)
        spy = _py_spy(args.py_spy, PIDS[ports["mcp-hub"]]) if args.py_spy and "mcp-hub" in ports else None
        for r in range(args.rounds):
            for n in (names if r % 2 == 0 else names[::-1]):
                await _chunk(open_sessions[n], tools[n], args.chunk_seconds * args.scale,
                             results[n]["load"], SESSIONS)
                await _chunk(open_sessions[n], tools[n], args.chunk_seconds * args.scale / 2,
                             results[n]["one"], 1)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(30)
            log(f"py-spy profile of the hub: {args.py_spy}")
        for sessions in open_sessions.values():
            for s in sessions:
                await s.close()
    return results


def _py_spy(out: str, pid: int) -> subprocess.Popen[bytes]:
    """``py-spy record`` of the hub process for the measured rounds (collapsed stacks,
    GIL-holding samples only: where the hub's own CPU goes)."""
    spy = Path(sys.executable).with_name("py-spy")
    return subprocess.Popen([str(spy), "record", "--pid", str(pid), "--rate", "250", "--gil",
                             "--nonblocking", "--format", "raw", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@asynccontextmanager
async def contextlib_exit_stack() -> AsyncIterator[Any]:
    from contextlib import AsyncExitStack
    async with AsyncExitStack() as stack:
        yield stack


def report(results: dict[str, dict[str, Sample]]) -> str:
    def stats(s: Sample) -> tuple[float, float, float]:
        lat = sorted(s.latencies)
        return len(lat) / s.seconds if s.seconds else float("nan"), percentile(lat, 50) * 1e3, percentile(lat, 99) * 1e3

    base = stats(results["direct"]["load"]) if "direct" in results else None
    base_one = stats(results["direct"]["one"]) if "direct" in results else None
    hub_rate = stats(results["mcp-hub"]["load"])[0] if "mcp-hub" in results else None
    def cpu_us(s: Sample) -> float:
        return s.cpu / s.cpu_calls * 1e6 if s.cpu_calls else float("nan")

    base_cpu = cpu_us(results["direct"]["load"]) if "direct" in results else None
    rows = []
    for n, parts in results.items():
        rate, p50, p99 = stats(parts["load"])
        _, one50, one99 = stats(parts["one"])
        cpu = cpu_us(parts["load"])
        load = parts["load"]
        own = load.cpu_own / load.cpu_calls * 1e6 if load.cpu_calls else float("nan")
        one = parts["one"]  # the proxy's own CPU per call with one call in flight
        own_one = one.cpu_own / one.cpu_calls * 1e6 if one.cpu_calls else float("nan")
        rows.append([n, f"{cpu:.0f} ({own:.0f} + {cpu - own:.0f})", fmt_ratio(base_cpu / cpu) if base_cpu else "—",
                     f"{rate:.0f}", fmt_ms(p50), fmt_ms(p99),
                     fmt_ratio(rate / base[0]) if base and base[0] else "—",
                     fmt_ratio(hub_rate / rate) if hub_rate and rate else "—",
                     fmt_ms(one50), f"{one50 - base_one[1]:+.2f}" if base_one else "—", fmt_ms(one99),
                     f"{own_one:.0f}" if n != "direct" else "—",
                     str(parts["load"].errors + parts["one"].errors)])
    return markdown_table(["target", "server CPU µs/call (proxy + upstream)", "calls per CPU-s vs direct",
                           "calls/s (16×4)", "p50 ms", "p99 ms", "vs direct",
                           "hub ÷ this", "p50 ms (1 in flight)", "added p50", "p99 ms (1)",
                           "proxy CPU µs/call (1 in flight)", "errors"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every duration")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk-seconds", type=float, default=4.0)
    parser.add_argument("--base-tree", type=Path, metavar="DIR",
                        help="also run the hub of another checkout (e.g. `git archive` of main "
                             "unpacked in DIR) as target 'hub (base)', interleaved with the others")
    parser.add_argument("--answers", action="store_true",
                        help="also run this checkout's hub with [hub.http] answers = \"json\" as "
                             "target 'hub (json)': SSE answers (the default) against JSON bodies")
    parser.add_argument("--identity", action="store_true",
                        help="the hubs serve a named token whose access rule maps it to a profile "
                             "(the per-call cost of identity checks)")
    parser.add_argument("--py-spy", metavar="OUT", help="record the hub process with py-spy "
                        "(pip install py-spy) during the measured rounds, collapsed stacks to OUT")
    args = parser.parse_args(argv)
    if args.identity:
        global TOKEN
        TOKEN = "bench-token-0123456789abcdef"
    if args.answers:
        TARGETS["hub (json)"] = lambda tmp: hub(tmp, ROOT, "hub-json", 'answers = "json"\n')
        args.targets.append("hub (json)")
    if args.base_tree is not None:
        base = args.base_tree.resolve()
        TARGETS["hub (base)"] = lambda tmp: hub(tmp, base, "hub-base")
        args.targets.append("hub (base)")
    import os
    load = os.getloadavg()
    started = time.strftime("%H:%M:%S", time.gmtime())
    results = asyncio.run(run(args))
    print(f"{started} UTC, load average {load[0]:.1f} at start, {os.cpu_count()} cores (shared machine)")
    for n, parts in results.items():
        for kind, sample in parts.items():
            if sample.errors:
                print(f"{n} ({kind}): {sample.errors} errors, first: {sample.first_error}")
    print(report(results))
    print(headline(results))
    return 0


def headline(results: dict[str, dict[str, Sample]]) -> str:
    """The three targets of one run side by side: hub ÷ direct and hub ÷ FastMCP calls/s
    (16 × 4 in flight), and the hub's added p50 at one call in flight."""
    def rate(name: str) -> float | None:
        s = results.get(name, {}).get("load")
        return len(s.latencies) / s.seconds if s is not None and s.seconds else None

    def p50(name: str) -> float | None:
        s = results.get(name, {}).get("one")
        return percentile(sorted(s.latencies), 50) * 1e3 if s is not None and s.latencies else None

    hub, direct_rate, peer = rate("mcp-hub"), rate("direct"), rate("fastmcp")
    hub_p50, direct_p50 = p50("mcp-hub"), p50("direct")
    parts = [
        f"hub ÷ SDK server direct: {hub / direct_rate:.2f}× calls/s (target ≥ 1.0×)"
        if hub and direct_rate else "hub ÷ SDK server direct: not measured",
        f"hub ÷ FastMCP proxy: {hub / peer:.2f}× calls/s (target ≥ 2×)"
        if hub and peer else "hub ÷ FastMCP proxy: not measured (no bench/peers/.venv-fastmcp)",
        f"added p50 at 1 in flight: {hub_p50 - direct_p50:+.2f} ms (target ≤ +0.5 ms)"
        if hub_p50 is not None and direct_p50 is not None else "added p50: not measured",
    ]
    return "\n".join(parts)


if __name__ == "__main__":
    sys.exit(main())
