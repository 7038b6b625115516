"""What signing in costs per call: static tokens against OAuth access tokens (JWT).

Two measurements, side by side in one run:

* ``guard``: the HTTP guard alone (DNS-rebinding checks, authentication, the
  identity on the scope) in front of an app that answers at once, driven
  in-process — no sockets, so the difference is the authentication itself. The
  JWT is verified once and then served from the per-token cache, which is the
  steady state of a client that reuses its token.
* ``e2e``: two real hub processes in front of the echo upstream, one with a
  static token and one with ``[auth]`` and a token minted by oauth2-mock-server
  (Node), called alternately in blocks by the SDK's ClientSession over
  Streamable HTTP.

Usage: ``python -m bench.auth_bench [--calls N] [--no-e2e]``. Prints p50/p90 per
call for each and the added p50 of ``[auth]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from bench.common import percentile
from mcp_hub.auth.authenticator import Authenticator
from mcp_hub.auth.discovery import IssuerKeys
from mcp_hub.auth.jwt_verify import JwtVerifier
from mcp_hub.auth.settings import AuthConfig
from mcp_hub.config.model import HttpConfig
from mcp_hub.downstream.http.app import GuardMiddleware

ISSUER = "https://idp.example.com"
STATIC = "static-token-0123456789abcdef"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def _guard(auth: AuthConfig | None, client: httpx2.AsyncClient | None) -> GuardMiddleware:
    http = HttpConfig(auth_tokens=[STATIC])
    authn = Authenticator(tokens=http.token_entries(), auth=auth, public_url="http://127.0.0.1:8765",
                          name="bench", profiles=frozenset, rules=list)
    if auth is not None and client is not None:
        keys = IssuerKeys(ISSUER, jwks_uri=f"{ISSUER}/jwks", client=client)
        authn.verifier = JwtVerifier(keys, algorithms=auth.algorithms, leeway=auth.leeway_seconds)
    return GuardMiddleware(_ok, bind_host="127.0.0.1", http=http, authn=authn)


async def _drive(guard: GuardMiddleware, token: str, calls: int) -> list[float]:
    headers = [(b"host", b"127.0.0.1:8765"), (b"authorization", f"Bearer {token}".encode())]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    times = []
    for _ in range(calls):
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers,
                 "query_string": b"", "client": ("127.0.0.1", 1), "scheme": "http"}
        started = time.perf_counter()
        await guard(scope, receive, send)
        times.append(time.perf_counter() - started)
    assert all(m.get("status", 200) == 200 for m in sent if m["type"] == "http.response.start")
    return times


async def guard_bench(calls: int) -> dict[str, float]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key())), "kid": "k1", "alg": "RS256"}
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(
        lambda request: httpx2.Response(200, json={"keys": [jwk]})))
    now = int(time.time())
    token = jwt.encode({"iss": ISSUER, "sub": "alice", "aud": "http://127.0.0.1:8765/mcp", "iat": now,
                        "exp": now + 3600}, private, algorithm="RS256", headers={"kid": "k1"})
    static = _guard(None, None)
    oauth = _guard(AuthConfig(issuer=ISSUER, audience="http://127.0.0.1:8765/mcp"), client)
    results: dict[str, list[float]] = {"static": [], "jwt": []}
    for _ in range(5):  # alternate blocks so drift in machine load hits both alike
        results["static"] += await _drive(static, STATIC, calls // 5)
        results["jwt"] += await _drive(oauth, token, calls // 5)
    await client.aclose()
    return _summary(results)


def _summary(results: dict[str, list[float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, values in results.items():
        ordered = sorted(values)
        out[f"{name}_p50_ms"] = percentile(ordered, 50) * 1000
        out[f"{name}_p90_ms"] = percentile(ordered, 90) * 1000
    out["added_p50_ms"] = out["jwt_p50_ms"] - out["static_p50_ms"]
    return out


async def e2e_bench(calls: int) -> dict[str, float]:
    from mcp.client.session import ClientSession

    from tests.auth_support import oauth_server
    from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "s").mkdir()
        (tmp / "o").mkdir()
        static_cfg = write_config(tmp / "s", echo_server_toml(),
                                  hub=f'[hub.http]\nauth_tokens = ["{STATIC}"]\n')
        async with oauth_server() as auth:
            audience = "https://hub.bench/mcp"
            oauth_cfg = write_config(tmp / "o", echo_server_toml()
                                     + f'[auth]\nissuer = "{auth.issuer}"\naudience = "{audience}"\n')
            async with http_hub(static_cfg, tmp / "s") as s_hub, http_hub(oauth_cfg, tmp / "o") as o_hub:
                token = await auth.token(sub="alice", aud=audience)
                async with (http_session(s_hub.mcp_url, headers={"Authorization": f"Bearer {STATIC}"}) as s,
                            http_session(o_hub.mcp_url, headers={"Authorization": f"Bearer {token}"}) as o):
                    results: dict[str, list[float]] = {"static": [], "jwt": []}
                    sessions: dict[str, ClientSession] = {"static": s, "jwt": o}
                    for name in sessions:  # warm-up: first calls, key fetch
                        for _ in range(20):
                            await sessions[name].call_tool("echo_echo", {"text": "x"})
                    for _ in range(10):
                        for name, session in sessions.items():
                            for _ in range(calls // 10):
                                started = time.perf_counter()
                                await session.call_tool("echo_echo", {"text": "x"})
                                results[name].append(time.perf_counter() - started)
    return _summary(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per variant (guard)")
    parser.add_argument("--e2e-calls", type=int, default=400, help="calls per variant (e2e)")
    parser.add_argument("--no-e2e", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"guard": anyio.run(guard_bench, args.calls)}
    if not args.no_e2e:
        report["e2e"] = anyio.run(e2e_bench, args.e2e_calls)
    for part, numbers in report.items():
        print(f"{part}: " + ", ".join(f"{k}={v:.4f}" for k, v in numbers.items()))
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
