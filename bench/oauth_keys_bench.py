"""Per-call cost of the key grants once their tokens are cached, against a static token.

One command, from the repository root::

    .venv/bin/python bench/oauth_keys_bench.py --calls 300 --rounds 3

Real parts: the key-checking authorization server (oauth2-mock-server from npm,
``tests/fixtures/oauth/key_auth_server.mjs``) and two SDK-built protected MCP servers
(one with the DPoP check in front). One in-process hub has five upstreams:

- ``static``: ``headers = {Authorization = "Bearer <token>"}``, a token fetched once;
- ``secret``: ``client_credentials`` with a client secret;
- ``pkjwt``: ``client_credentials`` with ``client_auth = "private_key_jwt"``;
- ``wif``: ``grant = "jwt_bearer"`` with an ``assertion_file``;
- ``dpop``: ``client_credentials`` with ``dpop = true`` (a fresh proof per request,
  checked by the upstream).

Tokens live an hour, so after the warm-up no grant asks for a token again. The rounds
call ``whoami`` on each upstream in turn (the order rotating per round), one call at a
time; reported per upstream: p50 and mean of a call, the hub process's CPU per call
(the upstreams and the authorization server are other processes), and each mean and
CPU figure over ``static``'s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from cryptography.hazmat.primitives.asymmetric import ec, rsa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp_hub.config.model import load_config
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline.context import CallContext
from tests.oauth_key_parts import key_server, pems, workload_jwt
from tests.oauth_parts import protected_server

UPSTREAMS = ("static", "secret", "pkjwt", "wif", "dpop")


def _toml(tmp: Path, auth: str, url: str, dpop_url: str, token: str) -> Path:
    key, workload = tmp / "client.pem", tmp / "workload.jwt"
    common = f'issuer = "{auth}"\nclient_id = "bench"\n'
    oauth = {
        "secret": f'grant = "client_credentials"\n{common}client_secret = "s"\n',
        "pkjwt": f'grant = "client_credentials"\n{common}client_auth = "private_key_jwt"\n'
                 f'private_key_file = "{key}"\n',
        "wif": f'grant = "jwt_bearer"\nclient_id = "bench"\nassertion_file = "{workload}"\n',
        "dpop": f'grant = "client_credentials"\n{common}client_secret = "s"\ndpop = true\n',
    }
    text = f'[hub]\nstate_dir = "{tmp / "state"}"\nstartup_timeout = 30\n\n'
    text += (f'[servers.static]\nurl = "{url}"\nprefix = "static"\n'
             f'headers = {{Authorization = "Bearer {token}"}}\n\n')
    for name, body in oauth.items():
        target = dpop_url if name == "dpop" else url
        text += (f'[servers.{name}]\nurl = "{target}"\nauth = "oauth"\nprefix = "{name}"\n\n'
                 f'[servers.{name}.oauth]\n{body}\n')
    path = tmp / "servers.toml"
    path.write_text(text)
    return path


async def _round(hub: Hub, name: str, calls: int) -> tuple[list[float], float]:
    """The latency of each of ``calls`` calls, and the hub process's CPU seconds for them."""
    tool = f"{name}_whoami"
    latencies = []
    cpu = time.process_time()
    for _ in range(calls):
        started = time.perf_counter()
        result = await hub.call_tool(tool, {}, CallContext(tool_name=tool))
        latencies.append(time.perf_counter() - started)
        assert not result.is_error, result
    return latencies, time.process_time() - cpu


async def run(calls: int, rounds: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    found: dict[str, list[float]] = {name: [] for name in UPSTREAMS}
    cpu: dict[str, float] = dict.fromkeys(UPSTREAMS, 0.0)
    with tempfile.TemporaryDirectory(prefix="oauth-keys-bench-") as folder:
        tmp = Path(folder)
        client, workload = ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(
            public_exponent=65537, key_size=2048)
        with key_server(token_seconds=3600) as auth, \
                protected_server(auth.url, tmp / "calls.txt") as url, \
                protected_server(auth.url, tmp / "calls-dpop.txt", "--dpop-log",
                                 str(tmp / "dpop.log")) as dpop_url:
            auth.trust(client_key=pems(client)[1], workload_key=pems(workload)[1])
            (tmp / "client.pem").write_text(pems(client)[0])
            (tmp / "workload.jwt").write_text(workload_jwt(workload, auth.url, "bench"))
            config = _toml(tmp, auth.url, url, dpop_url, auth.plain_token())
            async with Hub(load_config(config), load_plugin_modules=False) as hub:
                await hub.wait_ready(60)
                for name in UPSTREAMS:
                    await _round(hub, name, 20)  # warm-up: every token fetched and cached
                requests = len(auth.requests())
                for r in range(rounds):
                    order = UPSTREAMS[r % len(UPSTREAMS):] + UPSTREAMS[:r % len(UPSTREAMS)]
                    for name in order:
                        latencies, seconds = await _round(hub, name, calls)
                        found[name] += latencies
                        cpu[name] += seconds / (calls * rounds)
                assert len(auth.requests()) == requests, "a cached token was fetched again"
    return found, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found, cpu = anyio.run(run, args.calls, args.rounds)
    base = statistics.fmean(found["static"])
    rows = {name: {"p50_ms": round(statistics.median(v) * 1e3, 3),
                   "mean_ms": round(statistics.fmean(v) * 1e3, 3),
                   "ratio_to_static": round(statistics.fmean(v) / base, 3),
                   "hub_cpu_us": round(cpu[name] * 1e6, 1),
                   "cpu_ratio_to_static": round(cpu[name] / cpu["static"], 3)}
            for name, v in found.items()}
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'upstream':8} {'p50 ms':>8} {'mean ms':>8} {'mean/static':>12} {'hub CPU µs':>11} "
          f"{'CPU/static':>11}")
    for name, row in rows.items():
        print(f"{name:8} {row['p50_ms']:8.3f} {row['mean_ms']:8.3f} {row['ratio_to_static']:12.3f} "
              f"{row['hub_cpu_us']:11.1f} {row['cpu_ratio_to_static']:11.3f}")


if __name__ == "__main__":
    main()
