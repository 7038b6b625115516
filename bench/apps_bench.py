"""Per-call latency of an MCP Apps tool through the hub (extension bookkeeping's cost).

``python -m bench.apps_bench [--calls N]``: a hub in front of one Apps upstream
(:mod:`tests.fixtures_upstream.apps_server`, stdio), reached in each upstream era
(``protocol = "2025"`` and ``"auto"``, i.e. 2026-07-28), by an Apps host (the
SDK's ``Client`` in 2026-07-28 mode declaring the extension) over stdio and
Streamable HTTP. Prints p50 and p90 of sequential ``tools/call`` round trips.
Run it on two commits to compare them.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.extension import advertise

from tests.erastest import hub_client
from tests.hubtest import PY, ROOT, write_config

UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"


def _config(tmp: Path, protocol: str) -> Path:
    args = '["-m", "tests.fixtures_upstream.apps_server", "--label", "alpha"]'
    return write_config(tmp, f'[servers.alpha]\ncommand = "{PY}"\nargs = {args}\n'
                             f'cwd = "{ROOT}"\nprotocol = "{protocol}"\n')


async def _cell(transport: str, protocol: str, calls: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), protocol)
        async with hub_client(transport, "auto", config, Path(tmp),
                              extensions=[advertise(UI, {"mimeTypes": [MIME]})]) as host:
            for _ in range(50):
                await host.call_tool("alpha_show_dashboard", {})
            took: list[float] = []
            for _ in range(calls):
                start = time.perf_counter()
                await host.call_tool("alpha_show_dashboard", {})
                took.append((time.perf_counter() - start) * 1e6)
    took.sort()
    return statistics.median(took), took[int(len(took) * 0.9)]


async def main(calls: int) -> None:
    for transport in ("stdio", "http"):
        for protocol in ("2025", "auto"):
            p50, p90 = await _cell(transport, protocol, calls)
            print(f"{transport:5} upstream={protocol:4} p50={p50:7.0f} us p90={p90:7.0f} us")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    anyio.run(main, parser.parse_args().calls)
