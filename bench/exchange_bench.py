"""What acting as the caller costs per call once the exchanged token is cached.

One hub process with ``[auth]`` in front of one real OAuth-protected upstream
(``tests/fixtures/oauth/protected_server.py``), reached two ways by the same
signed-in caller:

* ``static``: ``[servers.stat]`` sends a fixed bearer token (a ``headers``
  entry) on the hub-wide connection;
* ``exchange``: ``[servers.exch]`` has ``grant = "token_exchange"``,
  ``subject = "caller"``: the call runs on the caller's own session from the
  per-user pool, with the token exchanged at the upstream's authorization server
  (oauth2-mock-server with RFC 8693, ``tests/fixtures/oauth/exchange_server.mjs``)
  on the first call and reused after.

Both call the upstream's ``echo`` tool, alternately in blocks by the SDK's
ClientSession over Streamable HTTP, after a warm-up (so the exchange is done).
Usage: ``python -m bench.exchange_bench [--calls N]``. Prints p50/p90 per call of
each, the ratio of the p50s, and how many exchanges the hub made (1: the first call's).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

from bench.common import percentile

AUDIENCE = "https://hub.bench/mcp"


def _config(tmp: Path, upstream: str, idp: str, upstream_as: str, static: str) -> Path:
    path = tmp / "servers.toml"
    path.write_text(
        f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 20\n\n'
        f'[servers.stat]\nurl = "{upstream}"\nprefix = "s"\n'
        f'headers = {{ Authorization = "Bearer {static}" }}\n\n'
        f'[servers.exch]\nurl = "{upstream}"\nauth = "oauth"\nprefix = "x"\n\n'
        f'[servers.exch.oauth]\ngrant = "token_exchange"\nsubject = "caller"\n'
        f'client_id = "hub-client"\nclient_secret = "hub-secret"\nissuer = "{upstream_as}"\n\n'
        f'[auth]\nissuer = "{idp}"\naudience = "{AUDIENCE}"\n')
    return path


def _exchanged(upstream_as: str, subject: str) -> str:
    """A token for the static server: one exchange made here, as an operator would."""
    answer = httpx2.post(f"{upstream_as}/token", auth=("hub-client", "hub-secret"), data={
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": subject,
        "subject_token_type": "urn:ietf:params:oauth:token-type:access_token"}, timeout=10)
    answer.raise_for_status()
    return str(answer.json()["access_token"])


async def run(calls: int) -> dict[str, Any]:
    from tests.auth_support import oauth_server
    from tests.exchange_parts import exchange_server
    from tests.hubtest import http_hub, http_session
    from tests.oauth_parts import protected_server

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        async with oauth_server() as idp:
            caller = await idp.token(sub="alice", aud=AUDIENCE, scope="mcp")
            with exchange_server(idp.issuer) as upstream_as, \
                    protected_server(upstream_as.url, tmp / "calls.txt") as upstream:
                static = _exchanged(upstream_as.url, caller)
                config = _config(tmp, upstream, idp.issuer, upstream_as.url, static)
                async with http_hub(config, tmp) as hub, \
                        http_session(hub.mcp_url,
                                     headers={"Authorization": f"Bearer {caller}"}) as session:
                    opened = await session.call_tool("x_connect", {})
                    assert not opened.is_error, opened
                    results = await _alternate(session, calls)
                # One exchange was the static token's, made above.
                hub_exchanges = upstream_as.stats()["exchanges"]["alice"] - 1
    out: dict[str, Any] = {}
    for name, values in results.items():
        ordered = sorted(values)
        out[f"{name}_p50_ms"] = percentile(ordered, 50) * 1000
        out[f"{name}_p90_ms"] = percentile(ordered, 90) * 1000
    out["ratio_p50"] = out["exchange_p50_ms"] / out["static_p50_ms"]
    out["hub_exchanges"] = hub_exchanges
    return out


async def _alternate(session: Any, calls: int) -> dict[str, list[float]]:
    tools = {"static": "s_echo", "exchange": "x_echo"}
    for tool in tools.values():  # warm-up: first calls, pools, caches
        for _ in range(30):
            result = await session.call_tool(tool, {"text": "x"})
            assert not result.is_error, result
    results: dict[str, list[float]] = {name: [] for name in tools}
    for block in range(10):
        order = list(tools.items()) if block % 2 == 0 else list(reversed(tools.items()))
        for name, tool in order:
            for _ in range(calls // 10):
                started = time.perf_counter()
                await session.call_tool(tool, {"text": "x"})
                results[name].append(time.perf_counter() - started)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per variant")
    args = parser.parse_args()
    report = anyio.run(run, args.calls)
    print(", ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in report.items()))
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
