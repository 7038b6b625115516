"""Side-by-side benchmark: the echo upstream directly, mcp-hub, FastMCP's proxy, Magg.

One command, from the repository root::

    .venv/bin/python bench/peers/run.py

It installs the peers it needs (pinned versions, each in its own venv under
``bench/peers/.venv-*``), then runs the same client workload — the ``mcp`` SDK's
``ClientSession`` over stdio — against every target, all fronting the same
upstream (``tests.fixtures.echo_server`` over stdio):

* p50/p99 latency and calls/s of the trivial ``echo`` tool at 1, 8 and 32
  concurrent calls on one session (chunks alternate between targets, so a drift
  in background load favours nobody);
* RSS (``VmRSS`` of ``/proc/PID/status``) of the proxy process itself after
  warm-up — its upstream children are not included; for ``direct`` it is the
  upstream's own RSS, shown for scale;
* time from spawning the proxy until the first ``tools/list`` that contains the
  tools of all 10 stdio upstreams (each with ``ECHO_STARTUP_DELAY`` 0.1…1.0 s),
  against the slowest upstream alone (spawn → its first ``tools/list``);
* time from calling the upstream's ``add_tool`` (which sends
  ``notifications/tools/list_changed``) until the client receives
  ``tools/list_changed``, and until the new tool shows up in ``tools/list``.

Ratios are to ``direct``. Loopback only; every loop is bounded in count and time.
Total runtime is about 2–3 minutes on a 2-core machine once the peers are installed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (
    ECHO_ARGS,
    PY,
    ROOT,
    Connected,
    LoadResult,
    base_env,
    find_tool,
    fmt_ms,
    fmt_ratio,
    hub_command,
    hub_config,
    interleaved_load,
    markdown_table,
    median,
    stdio_endpoint,
    vm_status,
    warm_up,
)

HERE = Path(__file__).resolve().parent

#: Pinned peer versions (PyPI). Magg needs Python >= 3.12.
FASTMCP_VERSION = "4.1.6"
MAGG_VERSION = "1.3.0"

CONCURRENCY = (1, 8, 32)
#: Total calls per (target, concurrency); split over the rounds.
CALLS = {1: 600, 8: 1200, 32: 1600}
N_UPSTREAMS = 10


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ peer installs


@dataclass
class Peer:
    name: str
    package: str
    version: str
    venv: Path
    min_python: tuple[int, int]
    available: bool = False
    reason: str = ""


def _python_ok(cmd: str, min_python: tuple[int, int], env: dict[str, str]) -> bool:
    try:
        out = subprocess.run(
            [cmd, "-c", f"import sys; print(sys.version_info[:2] >= {min_python!r})"],
            capture_output=True, text=True, env=env, timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == "True"


def _find_python(min_python: tuple[int, int]) -> tuple[str, dict[str, str]] | None:
    """An interpreter of at least ``min_python``: this one, pythonX.Y on PATH, or pyenv's."""
    env = dict(os.environ)
    base = getattr(sys, "_base_executable", sys.executable)
    if sys.version_info[:2] >= min_python:
        return base, env
    for minor in range(14, min_python[1] - 1, -1):
        cmd = shutil.which(f"python3.{minor}")
        if cmd and _python_ok(cmd, min_python, env):
            return cmd, env
    pyenv = shutil.which("pyenv")
    if pyenv:
        out = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True)
        versions = []
        for v in out.stdout.split():
            parts = v.split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                versions.append((int(parts[0]), int(parts[1]), v))
        for major, minor, v in sorted(versions, reverse=True):
            if (major, minor) < min_python:
                continue
            penv = dict(env, PYENV_VERSION=v)
            cmd = shutil.which(f"python{major}.{minor}") or f"python{major}.{minor}"
            if _python_ok(cmd, min_python, penv):
                return cmd, penv
    return None


def _installed_version(peer: Peer) -> str | None:
    py = peer.venv / "bin" / "python"
    if not py.exists():
        return None
    out = subprocess.run(
        [str(py), "-c", f"import importlib.metadata as m; print(m.version({peer.package!r}))"],
        capture_output=True, text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else None


def ensure_peer(peer: Peer, *, install: bool) -> Peer:
    """Make ``peer.venv`` hold ``peer.package==peer.version``; say why not if it can't."""
    if _installed_version(peer) == peer.version:
        peer.available = True
        return peer
    if not install:
        peer.reason = f"{peer.package}=={peer.version} not installed in {peer.venv} (--no-install)"
        return peer
    found = _find_python(peer.min_python)
    if found is None:
        peer.reason = (f"{peer.package} {peer.version} requires Python >= "
                       f"{'.'.join(map(str, peer.min_python))}; none found on PATH or in pyenv")
        return peer
    python, env = found
    log(f"installing {peer.package}=={peer.version} into {peer.venv} (with {python}) ...")
    shutil.rmtree(peer.venv, ignore_errors=True)
    steps = [
        [python, "-m", "venv", str(peer.venv)],
        [str(peer.venv / "bin" / "python"), "-m", "pip", "install", "-q",
         "--disable-pip-version-check", f"{peer.package}=={peer.version}"],
    ]
    for step in steps:
        out = subprocess.run(step, capture_output=True, text=True, env=env, timeout=900)
        if out.returncode != 0:
            tail = [ln for ln in (out.stderr or out.stdout).splitlines()
                    if ln.strip() and "is ignored" not in ln][-3:]
            peer.reason = f"install failed: {' / '.join(tail)}"
            return peer
    peer.available = _installed_version(peer) == peer.version
    if not peer.available:
        peer.reason = "installed, but the package's version could not be read back"
    return peer


# ------------------------------------------------------------------ targets


@dataclass
class Launch:
    command: str
    args: list[str]
    env: dict[str, str]
    cwd: Path


Servers = dict[str, dict[str, str]]  # server name -> extra environment of that upstream


def launch_direct(tmp: Path, servers: Servers) -> Launch:
    if len(servers) != 1:
        raise ValueError("direct talks to exactly one upstream")
    (env,) = servers.values()
    return Launch(PY, list(ECHO_ARGS), base_env(**env), ROOT)


def launch_hub(tmp: Path, servers: Servers) -> Launch:
    config = hub_config(tmp / "servers.toml", servers)
    return Launch(PY, hub_command(config), base_env(), ROOT)


def launch_fastmcp(tmp: Path, servers: Servers) -> Launch:
    config = {"mcpServers": {
        name: {"command": PY, "args": list(ECHO_ARGS), "cwd": str(ROOT),
               "env": {"PYTHONPATH": str(ROOT), **env}}
        for name, env in servers.items()
    }}
    path = tmp / "fastmcp.json"
    path.write_text(json.dumps(config, indent=2))
    py = HERE / ".venv-fastmcp" / "bin" / "python"
    return Launch(str(py), [str(HERE / "fastmcp_proxy.py"), str(path)],
                  base_env(FASTMCP_LOG_LEVEL="WARNING"), tmp)


def launch_magg(tmp: Path, servers: Servers) -> Launch:
    # Magg's per-server prefix must be an identifier without underscores.
    config = {"servers": {
        name: {"source": "bench", "command": PY, "args": list(ECHO_ARGS), "cwd": str(ROOT),
               "env": {"PYTHONPATH": str(ROOT), **env}, "prefix": name.replace("_", "")}
        for name, env in servers.items()
    }}
    path = tmp / "magg.json"
    path.write_text(json.dumps(config, indent=2))
    magg = HERE / ".venv-magg" / "bin" / "magg"
    return Launch(str(magg), ["serve", "--no-banner"],
                  base_env(MAGG_CONFIG_PATH=str(path), MAGG_LOG_LEVEL="WARNING"), tmp)


LAUNCHERS: dict[str, Callable[[Path, Servers], Launch]] = {
    "direct": launch_direct,
    "mcp-hub": launch_hub,
    "fastmcp": launch_fastmcp,
    "magg": launch_magg,
}


# ------------------------------------------------------------------ results


@dataclass
class TargetResult:
    name: str
    error: str = ""
    load: dict[int, LoadResult] = field(default_factory=dict)
    rss_kib: int | None = None
    hwm_kib: int | None = None
    startup_s: list[float] = field(default_factory=list)
    startup_error: str = ""
    notify_ms: list[float] = field(default_factory=list)
    visible_ms: list[float] = field(default_factory=list)
    notify_error: str = ""


class Notifications:
    """A message handler that timestamps every tools/list_changed."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.arrivals.append(time.perf_counter())
            self.event.set()

    def reset(self) -> None:
        self.arrivals.clear()
        self.event = anyio.Event()


async def list_all_tools(conn: Connected) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    for _ in range(100):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        result = await conn.session.list_tools(params=params)
        names += [t.name for t in result.tools]
        cursor = result.next_cursor
        if not cursor:
            break
    return names


async def measure_list_changed(conn: Connected, notes: Notifications, res: TargetResult, *,
                               reps: int, wait: float) -> None:
    """Call the upstream's ``add_tool``; time the client's tools/list_changed and re-list.

    Both clocks start when the call is sent. The re-list is polled every 20 ms
    alongside the wait for the notification, so a proxy that passes tools/list
    through shows the tool at once even when it never says so.
    """
    add = find_tool(await list_all_tools(conn), "add_tool")
    for k in range(reps):
        new = f"bench_{k}_{uuid.uuid4().hex[:6]}"
        notes.reset()
        visible_at: float | None = None

        async def poll(new: str = new) -> None:
            nonlocal visible_at
            while True:
                if any(n.endswith(new) for n in await list_all_tools(conn)):
                    visible_at = time.perf_counter()
                    return
                await anyio.sleep(0.02)

        t0 = time.perf_counter()
        await conn.session.call_tool(add, {"name": new})
        with anyio.move_on_after(wait):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll)
                await notes.event.wait()
        if visible_at is not None:
            res.visible_ms.append((visible_at - t0) * 1000)
        if not notes.arrivals:
            res.notify_error = f"no tools/list_changed within {wait:.0f} s"
            break
        res.notify_ms.append((notes.arrivals[0] - t0) * 1000)
        await anyio.sleep(0.3)  # let any debounce window close before the next change


async def _listed(launch: Launch, wanted: list[str], errlog: Any, t0: float) -> float:
    """Connect, then list until every name in ``wanted`` is there; seconds since ``t0``."""
    async with stdio_endpoint(launch.command, launch.args, env=launch.env,
                              cwd=launch.cwd, errlog=errlog) as conn:
        while True:
            names = await list_all_tools(conn)
            if all(any(n.endswith(w) for n in names) for w in wanted):
                return time.perf_counter() - t0
            await anyio.sleep(0.02)


async def measure_startup(name: str, tmp: Path, *, delays: list[float],
                          within: float) -> float:
    """Spawn → first tools/list holding every upstream's ``echo``; seconds.

    For ``direct`` the client itself opens one session per upstream, all at
    once, and the time is when the last of them has answered tools/list — the
    floor any proxy in front of the same ten processes can reach on this machine.
    """
    servers = {f"u{i}": {"ECHO_TOOL_PREFIX": f"u{i}_", "ECHO_STARTUP_DELAY": f"{d}"}
               for i, d in enumerate(delays)}
    with open(tmp / f"{name}-startup.log", "a") as errlog, anyio.fail_after(within):
        t0 = time.perf_counter()
        if name != "direct":
            launch = LAUNCHERS[name](tmp, servers)
            return await _listed(launch, [f"{s}_echo" for s in servers], errlog, t0)
        done: list[float] = []

        async def one(server: str) -> None:
            launch = launch_direct(tmp, {server: servers[server]})
            done.append(await _listed(launch, [f"{server}_echo"], errlog, t0))

        async with anyio.create_task_group() as tg:
            for server in servers:
                tg.start_soon(one, server)
        return max(done)


async def measure_slowest_alone(tmp: Path, delay: float) -> float:
    """The slowest upstream on its own: spawn → its first tools/list; seconds."""
    launch = launch_direct(tmp, {"u9": {"ECHO_TOOL_PREFIX": "u9_",
                                        "ECHO_STARTUP_DELAY": f"{delay}"}})
    with open(tmp / "slowest-alone.log", "a") as errlog, anyio.fail_after(60):
        return await _listed(launch, ["u9_echo"], errlog, time.perf_counter())


# ------------------------------------------------------------------ run


slowest_alone: list[float] = []


async def run(args: argparse.Namespace) -> dict[str, TargetResult]:
    targets = [t for t in LAUNCHERS if t in args.targets]
    results = {t: TargetResult(t) for t in targets}
    tmp_root = Path(tempfile.mkdtemp(prefix="mcp-hub-peers-"))
    log(f"logs and configs: {tmp_root}")
    echo = {"echo": {}}
    calls = {c: max(c, int(n * args.scale)) for c, n in CALLS.items()}

    # 1. Latency, throughput, RSS: every target connected at once, chunks alternate.
    live: dict[str, tuple[Connected, Notifications]] = {}
    stop = anyio.Event()

    async def hold(name: str, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Own one target's process and session (its context never leaves this task)."""
        tmp = tmp_root / name
        tmp.mkdir()
        notes = Notifications()
        scope = anyio.CancelScope(deadline=anyio.current_time() + 60)
        try:
            with scope, open(tmp / "stderr.log", "w") as errlog:
                launch = LAUNCHERS[name](tmp, echo)
                async with stdio_endpoint(launch.command, launch.args, env=launch.env,
                                          cwd=launch.cwd, errlog=errlog,
                                          message_handler=notes) as conn:
                    tool = find_tool(await list_all_tools(conn), "echo")
                    await warm_up(conn.session, tool, {"text": "warm"}, calls=200)
                    if conn.pid is not None:
                        results[name].rss_kib = vm_status(conn.pid, "VmRSS")
                    live[name] = (conn, notes)
                    log(f"{name}: ready (pid {conn.pid}, tool {tool!r}, "
                        f"RSS {results[name].rss_kib} KiB)")
                    scope.deadline = float("inf")
                    task_status.started()
                    await stop.wait()
                    if conn.pid is not None:
                        results[name].hwm_kib = vm_status(conn.pid, "VmHWM")
            if scope.cancelled_caught:
                raise TimeoutError("no answer within 60 s")
        except Exception as exc:  # a broken target is reported, the others still run
            if name not in live:
                results[name].error = f"{type(exc).__name__}: {exc}"[:300]
                log(f"{name}: failed: {results[name].error}")
                task_status.started()

    async with anyio.create_task_group() as tg:
        for name in targets:
            await tg.start(hold, name)
        try:
            sessions = {n: (c.session, find_tool(await list_all_tools(c), "echo"))
                        for n, (c, _) in live.items()}
            for conc in CONCURRENCY:
                log(f"load: {conc} concurrent, {calls[conc]} calls per target")
                cell = await interleaved_load(
                    sessions, {"text": "hello"}, concurrency=conc, calls=calls[conc],
                    rounds=args.rounds, chunk_seconds=args.chunk_seconds, progress=log)
                for name, res in cell.items():
                    results[name].load[conc] = res

            # 2. list_changed → downstream notification, on the same sessions.
            for name, (conn, notes) in live.items():
                log(f"list_changed: {name}")
                try:
                    with anyio.fail_after(60):
                        await measure_list_changed(conn, notes, results[name],
                                                   reps=args.notify_reps, wait=3.0)
                except Exception as exc:
                    results[name].notify_error = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            stop.set()

    # 3. Ten slow-starting upstreams.
    delays = [round(0.1 * (i + 1), 1) for i in range(N_UPSTREAMS)]
    slow_peers: set[str] = set()
    for rep in range(args.startup_reps):
        tmp = tmp_root / f"slowest-alone-{rep}"
        tmp.mkdir()
        alone = await measure_slowest_alone(tmp, max(delays))
        slowest_alone.append(alone)
        log(f"startup: slowest upstream alone rep {rep + 1}: {alone:.2f} s")
        for name in targets if rep % 2 == 0 else list(reversed(targets)):
            if name in slow_peers or results[name].error:
                continue
            tmp = tmp_root / f"{name}-startup-{rep}"
            tmp.mkdir()
            try:
                seconds = await measure_startup(name, tmp, delays=delays,
                                                within=args.startup_timeout)
            except Exception as exc:
                results[name].startup_error = f"{type(exc).__name__}: {exc}"[:200] or "error"
                if isinstance(exc, TimeoutError):
                    results[name].startup_error = f"not within {args.startup_timeout:.0f} s"
                log(f"startup {name}: {results[name].startup_error}")
                slow_peers.add(name)
                continue
            results[name].startup_s.append(seconds)
            log(f"startup {name} rep {rep + 1}: {seconds:.2f} s")
            if seconds > 20:  # one slow sample says enough; keep the run bounded
                slow_peers.add(name)
    return results


# ------------------------------------------------------------------ report


def _cell(value: float | None, base: float | None, fmt: Callable[[float], str],
          *, lower_is_better: bool = True) -> str:
    if value is None or value != value:
        return "—"
    if base is None or base != base or base == 0:
        return fmt(value)
    return f"{fmt(value)} ({fmt_ratio(value / base)})"


def report(results: dict[str, TargetResult]) -> str:
    names = list(results)
    direct = results.get("direct")

    def load_row(label: str, conc: int, attr: str, fmt: Callable[[float], str]) -> list[str]:
        base = getattr(direct.load[conc], attr) if direct and conc in direct.load else None
        row = [label]
        for n in names:
            res = results[n].load.get(conc)
            row.append(_cell(getattr(res, attr), base, fmt) if res else "—")
        return row

    rows: list[list[str]] = []
    for conc in CONCURRENCY:
        rows.append(load_row(f"p50 latency, {conc} concurrent (ms)", conc, "p50_ms", fmt_ms))
    for conc in CONCURRENCY:
        rows.append(load_row(f"p99 latency, {conc} concurrent (ms)", conc, "p99_ms", fmt_ms))
    for conc in CONCURRENCY:
        rows.append(load_row(f"calls/s, {conc} concurrent", conc, "calls_per_s",
                             lambda v: f"{v:.0f}"))
    added = ["added p50 latency, 1 concurrent (ms)"]
    for n in names:
        res, base = results[n].load.get(1), direct.load.get(1) if direct else None
        added.append(f"{res.p50_ms - base.p50_ms:+.2f}" if res and base and n != "direct"
                     else "—")
    rows.append(added)
    rows.append(["RSS after warm-up (MiB)"] + [
        f"{results[n].rss_kib / 1024:.0f}" + (" (upstream)" if n == "direct" else "")
        if results[n].rss_kib else "—" for n in names])
    rows.append(["peak RSS after load (MiB)"] + [
        f"{results[n].hwm_kib / 1024:.0f}" + (" (upstream)" if n == "direct" else "")
        if results[n].hwm_kib else "—" for n in names])

    base_start = median(direct.startup_s) if direct and direct.startup_s else None
    row = [f"all {N_UPSTREAMS} upstreams listed (s)"]
    for n in names:
        r = results[n]
        if r.startup_s:
            v = median(r.startup_s)
            extra = "" if n == "direct" or base_start is None else f" (+{v - base_start:.2f} s)"
            row.append(f"{v:.2f}{extra}")
        else:
            row.append(f"failed: {r.startup_error}" if r.startup_error else "—")
    rows.append(row)
    if slowest_alone:
        alone = median(slowest_alone)
        row = ["  … minus the slowest upstream alone (s)"]
        for n in names:
            r = results[n]
            row.append(f"+{median(r.startup_s) - alone:.2f}" if r.startup_s else "—")
        rows.append(row)

    base_notify = median(direct.notify_ms) if direct and direct.notify_ms else None
    row = ["upstream list_changed → client notified (ms)"]
    for n in names:
        r = results[n]
        if r.notify_ms and not r.notify_error:
            row.append(_cell(median(r.notify_ms), base_notify, fmt_ms))
        else:
            row.append(f"never ({r.notify_error})" if r.notify_error else "—")
    rows.append(row)
    base_vis = median(direct.visible_ms) if direct and direct.visible_ms else None
    row = ["new tool in tools/list after the change (ms)"]
    for n in names:
        r = results[n]
        row.append(_cell(median(r.visible_ms), base_vis, fmt_ms) if r.visible_ms else "—")
    rows.append(row)

    out = [markdown_table(["", *names], rows)]
    errors = [f"- {n}: {r.error}" for n, r in results.items() if r.error]
    if errors:
        out += ["", "Targets that did not run:", *errors]
    return "\n".join(out)


def machine_line() -> str:
    load = os.getloadavg()
    return (f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()}, load average {load[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", nargs="+", default=list(LAUNCHERS),
                        choices=list(LAUNCHERS), help="which targets to run (default: all)")
    parser.add_argument("--no-install", action="store_true",
                        help="do not install missing peers; skip them instead")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the call counts (default 1.0: 600/1200/1600)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating chunks per target and concurrency (default 3)")
    parser.add_argument("--chunk-seconds", type=float, default=8.0,
                        help="time budget of one chunk (default 8 s)")
    parser.add_argument("--startup-reps", type=int, default=3)
    parser.add_argument("--startup-timeout", type=float, default=120.0,
                        help="give up on a target's 10-upstream start after this long")
    parser.add_argument("--notify-reps", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the raw numbers here")
    args = parser.parse_args(argv)

    peers = {
        "fastmcp": Peer("fastmcp", "fastmcp", FASTMCP_VERSION, HERE / ".venv-fastmcp", (3, 10)),
        "magg": Peer("magg", "magg", MAGG_VERSION, HERE / ".venv-magg", (3, 12)),
    }
    skipped: list[str] = []
    for name, peer in peers.items():
        if name not in args.targets:
            continue
        ensure_peer(peer, install=not args.no_install)
        if not peer.available:
            skipped.append(f"- {name} skipped: {peer.reason}")
            args.targets = [t for t in args.targets if t != name]
    log(machine_line())
    started = time.perf_counter()
    results = anyio.run(run, args)
    elapsed = time.perf_counter() - started

    print(f"# mcp-hub side by side ({time.strftime('%Y-%m-%d %H:%M')})")
    print(f"{machine_line()}; fastmcp {FASTMCP_VERSION}, magg {MAGG_VERSION}; "
          f"run took {elapsed:.0f} s\n")
    print(report(results))
    if skipped:
        print("\n" + "\n".join(skipped))
    if args.json:
        args.json.write_text(json.dumps({
            name: {
                "error": r.error,
                "load": {c: {"calls": lr.calls, "errors": lr.errors, "p50_ms": lr.p50_ms,
                             "p99_ms": lr.p99_ms, "calls_per_s": lr.calls_per_s}
                         for c, lr in r.load.items()},
                "rss_kib": r.rss_kib, "hwm_kib": r.hwm_kib,
                "startup_s": r.startup_s, "startup_error": r.startup_error,
                "notify_ms": r.notify_ms, "visible_ms": r.visible_ms,
                "notify_error": r.notify_error,
            } for name, r in results.items()
        }, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
