"""The added cost per call of a rewritten tool, side by side with the same tool unrewritten.

One command, from the repository root::

    .venv/bin/python bench/rewrite_bench.py [--calls 3000] [--rounds 6] [--concurrency 1,8]

One hub (a real process) in front of two copies of the echo fixture: ``plain``
as it is, ``rw`` with its ``add`` tool rewritten (a new name and description,
``a`` renamed to ``x``, ``b`` fixed to 2: docs/rewriting.md). The client calls
``plain_add {a: 1, b: 2}`` and ``rw_sum {x: 1}``, which reach their upstreams as
the same ``add {a: 1, b: 2}``, so any difference is the rewrite's. The two
alternate in chunks (machine load hits both alike), over stdio and over
Streamable HTTP. Printed per transport and concurrency: p50 and p99 latency
and calls/s of each, and the ratios rewritten/plain (1.00× = no cost).

It also times the rewrite's own step in-process (``ArgumentPlan.apply``, the
work a rewritten call adds on the upstream side) in nanoseconds per call, and
the step a caller whose identity an ``[[access]]`` rule maps to a profile adds
(``AccessControl.profiles`` and the profile's translation of the call).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    ECHO_ARGS,
    PY,
    ROOT,
    LoadResult,
    base_env,
    fmt_ms,
    fmt_ratio,
    free_port,
    http_endpoint,
    markdown_table,
    run_load,
    stdio_endpoint,
    stop_process,
    wait_port,
    warm_up,
)

PLAIN = ("plain_add", {"a": 1, "b": 2})
REWRITTEN = ("rw_sum", {"x": 1})


def write_config(path: Path) -> Path:
    server = (f"command = {json.dumps(PY)}\nargs = {json.dumps(ECHO_ARGS)}\n"
              f"cwd = {json.dumps(str(ROOT))}\n")
    path.write_text(
        '[hub]\nstartup_timeout = 30\nlog_level = "warning"\n\n[tool_search]\nmode = "off"\n\n'
        f"[servers.plain]\n{server}\n[servers.rw]\n{server}\n"
        '[servers.rw.tools.add]\nname = "sum"\ndescription = "Add x and two."\n'
        '[servers.rw.tools.add.arguments.a]\nrename = "x"\n'
        "[servers.rw.tools.add.arguments.b]\nfixed = 2\n")
    return path


async def compare(session: Any, *, concurrency: int, calls: int, rounds: int
                  ) -> dict[str, LoadResult]:
    """Both tools, alternating chunks; the pooled results per side."""
    pooled = {name: LoadResult(concurrency, 0, 0, 0.0, []) for name in ("plain", "rewritten")}
    per_chunk = max(concurrency, calls // rounds)
    sides = {"plain": PLAIN, "rewritten": REWRITTEN}
    for r in range(rounds):
        for side in (("plain", "rewritten") if r % 2 == 0 else ("rewritten", "plain")):
            tool, args = sides[side]
            part = await run_load(session, tool, args, concurrency=concurrency,
                                  calls=per_chunk, max_seconds=60)
            acc = pooled[side]
            acc.calls += part.calls
            acc.errors += part.errors
            acc.seconds += part.seconds
            acc.latencies_ms.extend(part.latencies_ms)
    return pooled


async def measure(session: Any, transport: str, args: argparse.Namespace) -> list[list[str]]:
    for tool, tool_args in (PLAIN, REWRITTEN):
        result = await session.call_tool(tool, tool_args)
        assert not result.is_error and result.structured_content == {"sum": 3}, result
        await warm_up(session, tool, tool_args)
    rows = []
    for concurrency in args.concurrency:
        pooled = await compare(session, concurrency=concurrency, calls=args.calls,
                               rounds=args.rounds)
        plain, rewritten = pooled["plain"], pooled["rewritten"]
        assert plain.errors == rewritten.errors == 0, (plain.errors, rewritten.errors)
        rows.append([transport, str(concurrency),
                     fmt_ms(plain.p50_ms), fmt_ms(rewritten.p50_ms),
                     fmt_ratio(rewritten.p50_ms / plain.p50_ms),
                     fmt_ms(plain.p99_ms), fmt_ms(rewritten.p99_ms),
                     f"{plain.calls_per_s:.0f}", f"{rewritten.calls_per_s:.0f}",
                     fmt_ratio(rewritten.calls_per_s / plain.calls_per_s)])
        print(f"  {transport} c={concurrency} done", file=sys.stderr)
    return rows


async def run(args: argparse.Namespace) -> list[list[str]]:
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp) / "servers.toml")
        command = ["-m", "mcp_hub", "serve", "--config", str(config)]
        async with stdio_endpoint(PY, command) as conn:
            rows += await measure(conn.session, "stdio", args)
        port = free_port()
        proc = subprocess.Popen([PY, *command, "--transport", "http", "--port", str(port)],
                                env=base_env(), cwd=str(ROOT), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL)
        try:
            await wait_port(port, proc, what="hub")
            async with http_endpoint(f"http://127.0.0.1:{port}/mcp") as conn:
                rows += await measure(conn.session, "http", args)
        finally:
            await stop_process(proc)
    return rows


def plan_ns(loops: int = 200_000) -> tuple[float, float]:
    """ns per call of the rewrite's argument step, and of the plain dict copy it replaces."""
    from mcp_hub.rewrite.settings import ToolRewrite
    from mcp_hub.rewrite.tool import ArgumentPlan

    rule = ToolRewrite.model_validate({"arguments": {"a": {"rename": "x"}, "b": {"fixed": 2}}})
    plan = ArgumentPlan.of("rw_sum", rule)
    assert plan is not None
    client = {"x": 1}
    rewritten = min(timeit.repeat(lambda: plan.apply(client, {}), number=loops, repeat=5))
    plain_args = {"a": 1, "b": 2}
    plain = min(timeit.repeat(lambda: dict(plain_args), number=loops, repeat=5))
    return rewritten / loops * 1e9, plain / loops * 1e9


def profile_ns(loops: int = 100_000) -> float:
    """ns per call of finding an identity's profiles and translating its call by them."""
    from mcp_hub.config.model import parse_config
    from mcp_hub.hub.access import AccessControl, Caller
    from mcp_hub.registry.tool_registry import ToolRegistry
    from mcp_hub.rewrite.profiles import ProfileRewrites

    config = parse_config('[profiles.p.tools.rw_sum]\nname = "psum"\narguments.x.rename = "y"\n'
                          '[[access]]\nmatch = "token:ops"\n'
                          '[[access]]\nmatch = "token:agent"\nprofile = "p"\n')
    control = AccessControl(lambda: config, ToolRegistry(), _NoOwners())
    rewrites = ProfileRewrites(config.profiles["p"].tools)
    caller = Caller(identity="token:agent", attributes=frozenset({"token:agent"}))
    translate = rewrites.translator(dict)
    args = {"y": 1}

    def step() -> None:
        control.profiles(caller)
        translate("psum", args)
    return min(timeit.repeat(step, number=loops, repeat=5)) / loops * 1e9


class _NoOwners:
    def prompt_server(self, name: str) -> str | None:
        return None

    def resource_server(self, uri: str) -> str | None:
        return None

    def template_server(self, uri_template: str) -> str | None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--concurrency", default="1,8",
                        type=lambda s: [int(x) for x in s.split(",")])
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = anyio.run(run, args)
    print(markdown_table(
        ["transport", "conc.", "plain p50 ms", "rewritten p50 ms", "p50 ratio", "plain p99 ms",
         "rewritten p99 ms", "plain calls/s", "rewritten calls/s", "calls/s ratio"], rows))
    rewritten_ns, plain_ns = plan_ns()
    print(f"\nArgumentPlan.apply (rename + fixed): {rewritten_ns:.0f} ns per call "
          f"(a plain dict copy: {plain_ns:.0f} ns)")
    print(f"An identity's profiles and their translation of its call: {profile_ns():.0f} ns per call")
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
