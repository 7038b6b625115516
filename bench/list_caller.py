"""The "other client" of ``bench/list_bench.py``: echo calls from a process of its own.

    python bench/list_caller.py PORT TOOL

Opens one raw Streamable HTTP session to the hub on 127.0.0.1:PORT and reads
commands from stdin, one per line: ``start`` begins calling ``TOOL`` back to
back, ``stop`` ends that and prints the latencies (seconds, a JSON list) on one
line, ``exit`` leaves. Running it in its own process keeps the benchmark's
listers (which read megabytes of answers) from delaying its calls on the
client side: what it measures is the hub. Every loop is bounded in time.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.raw_http import RawSession, Sample

_MAX_SECONDS = 120.0


async def main(port: int, tool: str) -> None:
    session = RawSession("127.0.0.1", port)
    await session.open()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print("ready", flush=True)
    task: asyncio.Task[None] | None = None
    sample = Sample()
    while True:
        line = (await reader.readline()).decode().strip()
        if line == "start":
            await session.reconnect()
            sample = Sample()
            task = asyncio.create_task(session.loop(
                0, "tools/call", {"name": tool, "arguments": {"text": "x"}},
                time.perf_counter() + _MAX_SECONDS, sample))
        elif line == "stop" and task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            print(json.dumps(sample.latencies), flush=True)
        elif line in ("exit", ""):
            await session.close()
            return


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
