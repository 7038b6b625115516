"""Per-request cost of the extension audit middleware on a request it does not audit.

``python -m bench.extension_audit_bench [--requests N]``: awaits an empty handler
directly and through :class:`mcp_hub.downstream.extension_audit.ExtensionAudit`
(a ``tools/call`` context, which the middleware passes by), with ``[audit]`` off
and on, and prints microseconds per request for each.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from types import SimpleNamespace
from typing import Any

from mcp_hub.downstream.extension_audit import ExtensionAudit
from mcp_hub.hub.access import Caller


async def _handler(ctx: Any) -> None:
    return None


async def main(requests: int) -> None:
    ctx: Any = SimpleNamespace(request_id=1, method="tools/call",
                               params={"name": "x", "arguments": {}})
    for enabled in (False, True):
        hub: Any = SimpleNamespace(audit=SimpleNamespace(enabled=enabled))
        middleware = ExtensionAudit(hub, Caller())
        for label, through in (("direct", None), ("middleware", middleware)):
            start = time.perf_counter()
            for _ in range(requests):
                if through is None:
                    await _handler(ctx)
                else:
                    await through(ctx, _handler)
            took = (time.perf_counter() - start) / requests * 1e6
            print(f"audit {'on ' if enabled else 'off'} {label:10} {took:.2f} us/request")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200_000)
    asyncio.run(main(parser.parse_args().requests))
