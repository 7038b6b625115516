"""Run the official MCP conformance suite's server scenarios and compare runs.

Usage (from the repository root)::

    # the suite against any Streamable HTTP endpoint
    python -m tests.conformance.run --url http://127.0.0.1:3001/mcp --json out.json

    # start the fixture (tests/fixtures/conformance_server.py) over HTTP and run the suite
    python -m tests.conformance.run --fixture

    # compare two endpoints: everything that passes directly must pass through the hub
    python -m tests.conformance.run --compare http://127.0.0.1:3001/mcp http://127.0.0.1:8765/mcp

    # start the fixture over HTTP and the hub fronting the fixture over stdio
    # (prefix = ""), run the suite against both and compare
    python -m tests.conformance.run --fixture-vs-hub --json conformance.json

    # the same with the 0.2 suite (--next), the hub speaking 2026-07-28 to the fixture
    python -m tests.conformance.run --fixture-vs-hub --next --protocol 2026

    # any Streamable HTTP server directly vs. the hub fronting it (prefix = "")
    python -m tests.conformance.run --via-hub http://127.0.0.1:3000/mcp --next --protocol auto

    # the skills fixture (tests/fixtures/skills_server.py) directly vs. through the hub,
    # the suite's Agent Skills scenarios only
    python -m tests.conformance.run --fixture-vs-hub --skills --next --protocol 2026 \
        --scenario sep-2640-skills-enumeration,sep-2640-skills-directory,sep-2640-skills-manifest

The comparison honours ``tests/conformance/expected_failures.txt`` (see
``results.load_expected_failures``). Exit status: 0 when the run has no failed
scenario (single run) or the comparison holds (compare modes), else 1.

The suite is ``@modelcontextprotocol/conformance`` under ``js/node_modules``,
run with the Node binary next to it (Node >= 22, ``make setup`` installs both).
``--next`` runs the 0.2 line instead, installed beside it as ``conformance-next``
(``js/package.json``); its scenarios cover 2026-07-28 as well.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from tests.conformance.results import (
    Comparison,
    SuiteResult,
    compare,
    load_expected_failures,
    parse_output_dir,
)

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "js" / "node_modules" / ".bin" / "node"
SUITE_JS = (
    ROOT / "js" / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
)
#: The suite's 0.2 line (2026-07-28 scenarios), installed as the ``conformance-next`` alias.
SUITE_JS_NEXT = ROOT / "js" / "node_modules" / "conformance-next" / "dist" / "index.js"
EXPECTED_FAILURES = Path(__file__).with_name("expected_failures.txt")
FIXTURE_MODULE = "tests.fixtures.conformance_server"
READY_TOOL = "test_simple_text"
#: The Agent Skills fixture (``--skills``) and the tool that says it is up.
SKILLS_MODULE = "tests.fixtures.skills_server"
SKILLS_READY_TOOL = "add_skill"


def suite_available(suite_js: Path = SUITE_JS) -> bool:
    return NODE.exists() and suite_js.exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- running the suite


async def run_suite(
    url: str,
    *,
    suite: str = "all",
    scenario: str | None = None,
    output_dir: Path | None = None,
    timeout_s: float = 900,
    suite_js: Path = SUITE_JS,
) -> SuiteResult:
    """Run the suite's server scenarios against ``url`` and parse the results.

    ``suite="all"`` includes the suite's pending scenarios (json-schema-2020-12,
    server-sse-polling); ``"active"`` is the suite's default. ``scenario`` may name
    several, comma-separated: each runs in turn.
    """
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as tmp:
        out = output_dir or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        cmd = [str(NODE), str(suite_js), "server", "--url", url, "-o", str(out)]
        runs = ([[*cmd, "--scenario", one] for one in scenario.split(",")] if scenario
                else [[*cmd, "--suite", suite]])
        console = ""
        with anyio.fail_after(timeout_s):
            for run in runs:
                proc = await anyio.run_process(
                    run, check=False, env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"}
                )
                console += (proc.stdout.decode(errors="replace") + "\n"
                            + proc.stderr.decode(errors="replace"))
        scenarios = parse_output_dir(out, console)
        if not scenarios:
            raise RuntimeError(f"the conformance suite produced no results:\n{console[-4000:]}")
        return SuiteResult(url=url, suite=scenario or suite, scenarios=scenarios)


async def compare_direct_and_hub(
    direct_url: str,
    hub_url: str,
    *,
    expected_failures: Path = EXPECTED_FAILURES,
    suite: str = "all",
    suite_js: Path = SUITE_JS,
    scenario: str | None = None,
) -> Comparison:
    """Run the suite against both URLs and compare: the hub may lose nothing."""
    direct = await run_suite(direct_url, suite=suite, suite_js=suite_js, scenario=scenario)
    hub = await run_suite(hub_url, suite=suite, suite_js=suite_js, scenario=scenario)
    return compare(direct, hub, load_expected_failures(expected_failures))


# --------------------------------------------------------------------------- serving targets


async def wait_until_serving(
    url: str, proc: anyio.abc.Process, *, expect_tool: str | None = READY_TOOL
) -> None:
    """Poll ``url`` with an MCP client until it initializes (and lists ``expect_tool``).

    Unbounded by itself: callers wrap it in ``anyio.fail_after``.
    """
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    while True:
        if proc.returncode is not None:
            raise RuntimeError(f"server for {url} exited with {proc.returncode}")
        try:
            with anyio.fail_after(5):
                async with (
                    httpx2.AsyncClient() as http,
                    streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    if expect_tool is None:
                        return
                    names = {t.name for t in (await session.list_tools()).tools}
                    if expect_tool in names:
                        return
        except Exception:  # not up yet (connection refused, upstream still starting, …)
            pass
        await anyio.sleep(0.1)


@asynccontextmanager
async def serve(
    cmd: Sequence[str],
    port: int,
    *,
    ready_timeout: float = 60,
    expect_tool: str | None = READY_TOOL,
) -> AsyncIterator[str]:
    """Start ``cmd`` (an HTTP MCP server on ``port``), yield its /mcp URL, stop it."""
    url = f"http://127.0.0.1:{port}/mcp"
    proc = await anyio.open_process(
        list(cmd), cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None
    )
    try:
        with anyio.fail_after(ready_timeout):
            await wait_until_serving(url, proc, expect_tool=expect_tool)
        yield url
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.terminate()
                with anyio.move_on_after(10):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            await proc.aclose()


def fixture_http_command(port: int, module: str = FIXTURE_MODULE) -> list[str]:
    return [sys.executable, "-m", module, "--transport", "http", "--port", str(port)]


def hub_command() -> list[str]:
    """The ``mcp-hub`` console script next to this interpreter, else its entry point."""
    script = Path(sys.executable).with_name("mcp-hub")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from mcp_hub.cli import main; sys.exit(main())"]


def write_hub_config(path: Path, python: str = sys.executable, *,
                     protocol: str | None = None, upstream_url: str | None = None,
                     module: str = FIXTURE_MODULE) -> Path:
    """A servers.toml that fronts the fixture ``module`` over stdio (or ``upstream_url``
    over Streamable HTTP) with an empty prefix, speaking ``protocol`` to it if given."""
    if upstream_url is None:
        server = (f"command = {json.dumps(python)}\n"
                  f'args = ["-m", "{module}", "--transport", "stdio"]\n'
                  f"cwd = {json.dumps(str(ROOT))}\n")
    else:
        server = f'url = {json.dumps(upstream_url)}\ntransport = "http"\n'
    era = f"protocol = {json.dumps(protocol)}\n" if protocol else ""
    path.write_text(
        "# mcp-hub in front of one server, tool names unchanged\n"
        f"[servers.conformance]\n{server}prefix = \"\"\n{era}"
    )
    return path


@asynccontextmanager
async def serve_fixture(module: str = FIXTURE_MODULE, ready_tool: str = READY_TOOL
                        ) -> AsyncIterator[str]:
    """The conformance fixture (or ``module``) over Streamable HTTP on a free loopback port."""
    port = free_port()
    async with serve(fixture_http_command(port, module), port, expect_tool=ready_tool) as url:
        yield url


@asynccontextmanager
async def serve_hub(config: Path | None = None, *, protocol: str | None = None,
                    upstream_url: str | None = None, module: str = FIXTURE_MODULE,
                    ready_tool: str = READY_TOOL) -> AsyncIterator[str]:
    """``mcp-hub serve --transport http`` fronting the fixture (stdio, prefix "")."""
    with tempfile.TemporaryDirectory(prefix="mcp-hub-conformance-") as tmp:
        cfg = config or write_hub_config(Path(tmp) / "servers.toml", protocol=protocol,
                                         upstream_url=upstream_url, module=module)
        port = free_port()
        cmd = [*hub_command(), "serve", "--transport", "http", "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--config", str(cfg)]
        async with serve(cmd, port, expect_tool=ready_tool) as url:
            yield url


async def fixture_vs_hub(
    *, expected_failures: Path = EXPECTED_FAILURES, suite: str = "all",
    suite_js: Path = SUITE_JS, protocol: str | None = None, skills: bool = False,
    scenario: str | None = None,
) -> Comparison:
    """The fixture (``skills``: the Agent Skills fixture) directly and through the hub."""
    module, ready = (SKILLS_MODULE, SKILLS_READY_TOOL) if skills else (FIXTURE_MODULE, READY_TOOL)
    async with (serve_fixture(module, ready) as direct_url,
                serve_hub(protocol=protocol, module=module, ready_tool=ready) as hub_url):
        return await compare_direct_and_hub(
            direct_url, hub_url, expected_failures=expected_failures, suite=suite,
            suite_js=suite_js, scenario=scenario,
        )


async def url_vs_hub(
    url: str, *, expected_failures: Path = EXPECTED_FAILURES, suite: str = "all",
    suite_js: Path = SUITE_JS, protocol: str | None = None, scenario: str | None = None,
) -> Comparison:
    """``url`` (a server started elsewhere) directly vs. the hub fronting it over HTTP."""
    async with serve_hub(protocol=protocol, upstream_url=url) as hub_url:
        return await compare_direct_and_hub(
            url, hub_url, expected_failures=expected_failures, suite=suite, suite_js=suite_js,
            scenario=scenario)


# --------------------------------------------------------------------------- CLI


def _print_suite(result: SuiteResult) -> None:
    for name, r in sorted(result.scenarios.items()):
        mark = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}[r.status]
        print(f"{mark} {name}" + (f"  ({r.reason})" if r.reason else ""))
    s = result.summary
    print(
        f"{result.url}: {s['passed']}/{s['total']} passed, "
        f"{s['warned']} warned, {s['failed']} failed"
    )


async def _main(args: argparse.Namespace) -> int:
    expected = Path(args.expected_failures)
    suite_js = SUITE_JS_NEXT if args.next else SUITE_JS
    if args.compare or args.fixture_vs_hub or args.via_hub:
        if args.compare:
            comparison = await compare_direct_and_hub(
                *args.compare, expected_failures=expected, suite=args.suite, suite_js=suite_js,
                scenario=args.scenario)
        elif args.via_hub:
            comparison = await url_vs_hub(args.via_hub, expected_failures=expected,
                                          suite=args.suite, suite_js=suite_js,
                                          protocol=args.protocol, scenario=args.scenario)
        else:
            comparison = await fixture_vs_hub(expected_failures=expected, suite=args.suite,
                                              suite_js=suite_js, protocol=args.protocol,
                                              skills=args.skills, scenario=args.scenario)
        _print_suite(comparison.direct)
        _print_suite(comparison.hub)
        print(comparison.report())
        payload = comparison.to_json()
        code = 0 if comparison.ok else 1
    else:
        if args.fixture:
            module, ready = ((SKILLS_MODULE, SKILLS_READY_TOOL) if args.skills
                             else (FIXTURE_MODULE, READY_TOOL))
            async with serve_fixture(module, ready) as url:
                result = await run_suite(url, suite=args.suite, scenario=args.scenario,
                                         suite_js=suite_js)
        else:
            result = await run_suite(args.url, suite=args.suite, scenario=args.scenario,
                                     suite_js=suite_js)
        _print_suite(result)
        payload = result.to_json()
        code = 1 if result.count("fail") else 0
    if args.json:
        await anyio.Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"results written to {args.json}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the MCP conformance suite's server scenarios")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--url", help="Streamable HTTP endpoint to test")
    target.add_argument("--fixture", action="store_true", help="start the fixture and test it")
    target.add_argument("--compare", nargs=2, metavar=("DIRECT_URL", "HUB_URL"))
    target.add_argument(
        "--fixture-vs-hub", action="store_true", help="start fixture and hub, compare them"
    )
    target.add_argument("--via-hub", metavar="URL",
                        help="a running server directly vs. a hub started in front of it")
    parser.add_argument("--next", action="store_true",
                        help="run the 0.2 suite (js/node_modules/conformance-next)")
    parser.add_argument("--protocol", choices=["2025", "2026", "auto"],
                        help="the hub's [servers.NAME] protocol towards the server it fronts")
    parser.add_argument("--skills", action="store_true",
                        help="--fixture/--fixture-vs-hub: the Agent Skills fixture "
                             "(tests/fixtures/skills_server.py)")
    parser.add_argument("--suite", default="all", help='"all" (default), "active" or "pending"')
    parser.add_argument("--scenario", help="run only these scenarios (comma-separated)")
    parser.add_argument("--expected-failures", default=str(EXPECTED_FAILURES))
    parser.add_argument("--json", help="write the results as JSON to this file")
    args = parser.parse_args(argv)
    suite_js = SUITE_JS_NEXT if args.next else SUITE_JS
    if not suite_available(suite_js):
        print(f"conformance suite not installed ({suite_js}); run `make setup`", file=sys.stderr)
        return 2
    return anyio.run(_main, args)


if __name__ == "__main__":
    sys.exit(main())
