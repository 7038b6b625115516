"""Run a Hub over stdio or HTTP until told to stop.

Both runners own the Hub's lifetime: they enter it, serve, and on SIGINT or
SIGTERM stop accepting, let in-flight calls finish (bounded), then close every
upstream so no child process outlives the hub.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from mcp_hub import compat, telemetry
from mcp_hub.compat import hooks
from mcp_hub.config.model import HubConfig
from mcp_hub.downstream.draining import drain_on_signals
from mcp_hub.downstream.heap_watch import keep_heap_settled
from mcp_hub.downstream.instructions import FirstRequestGate, hub_instructions
from mcp_hub.downstream.server import build_server
from mcp_hub.downstream.stdio.fastpath import StdioFastPath
from mcp_hub.downstream.stdio.transport import stdio_server
from mcp_hub.errors import ConfigError
from mcp_hub.hub.core import Hub
from mcp_hub.pipeline import runtime

__all__ = ["serve_http", "serve_stdio"]

logger = logging.getLogger(__name__)

#: After the drain (mcp_hub.hub.drain), how long uvicorn waits for connections still open.
GRACEFUL_SECONDS = 2


def check_libraries(config: HubConfig, *, transport: str, stateless: bool = False) -> None:
    """The start-up check of the private hooks (:mod:`mcp_hub.compat`) this config can
    reach: refuses to start when a feature it uses lost a hook it cannot do without;
    warns once for each feature turned off instead. The hooks of HTTP serving, replicas,
    ``[auth]`` and OTLP export are probed only when the config uses them (a probe imports
    its library)."""
    in_use = {hooks.STDIO_SERVER} if transport == "stdio" else set()
    if transport == "http" and not stateless:
        in_use |= {hooks.HTTP_SESSIONS, hooks.HTTP_FAST_PATH}
    if any(s.protocol != "2025" for s in config.servers.values()):
        in_use.add(hooks.MODERN_UPSTREAMS)
    if config.auth is not None:
        in_use.add(hooks.JWT_KEYS)
    if transport == "http" and config.state.url:
        in_use.add(hooks.REPLICA_BUS)
    if telemetry.resolve(config.telemetry) is not None:
        in_use.add(hooks.OTLP_DURATIONS)
    compat.enforce(in_use)


async def serve_stdio(config: HubConfig, *, profile: str | None = None) -> None:
    """Serve the hub on this process's stdin/stdout (Claude Desktop, IDEs)."""
    check_libraries(config, transport="stdio")
    async with Hub(config) as hub:
        hub.runtime.listener = runtime.Listener("stdio")
        server = build_server(hub, profile)
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_on_signals, hub.drain, config.hub.drain_seconds,
                          tg.cancel_scope.cancel)
            _start_reloaders(hub, tg)
            def fast_path(send_raw: Any, tg: anyio.abc.TaskGroup) -> StdioFastPath:
                return StdioFastPath(hub, profile, send_raw, tg)

            options = server.create_initialization_options()

            async def settle() -> None:
                # The first answer's instructions name upstream problems as they are then.
                await hub.wait_ready()
                options.instructions = server.instructions = hub_instructions(hub)
                # ... and its capabilities are the upstreams' as they are then.
                options.capabilities = server.create_initialization_options().capabilities

            async with stdio_server(fast_path) as (read, write):
                await server.run(FirstRequestGate(read, settle), write, options)
            tg.cancel_scope.cancel()


def _uvicorn_server(config: Any) -> Any:
    """uvicorn's server, minus its own handling of SIGINT/SIGTERM.

    The hub drains first (:func:`drain_on_signals`) and then sets ``should_exit``;
    uvicorn would otherwise stop at once and re-raise the signal after its own
    shutdown, killing the process before the Hub closes its upstreams.
    (uvicorn is imported here so that serving stdio never pays for it.)
    """
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return _Server(config)


def _start_reloaders(hub: Hub, tg: anyio.abc.TaskGroup) -> None:
    """Hot reload: on SIGHUP, and when the config file changes on disk; and the heap
    frozen again once each change has settled (:mod:`.heap_watch`)."""
    tg.start_soon(hub.reload_on_sighup)
    tg.start_soon(keep_heap_settled, hub)
    if hub.config.hub.watch_config:
        tg.start_soon(hub.watch_config)


def check_bind(host: str, tokens: list[str], allow_unauthenticated: bool) -> None:
    """Refuse a non-loopback bind without auth unless explicitly allowed."""
    if runtime.is_loopback(host) or tokens or allow_unauthenticated:
        return
    raise ConfigError(
        f"refusing to listen on {host} without authentication: set hub.http.auth_tokens "
        "(e.g. auth_tokens = [\"${MCP_HUB_TOKEN}\"]) or pass --allow-unauthenticated"
    )


async def serve_http(
    config: HubConfig,
    *,
    host: str,
    port: int,
    stateless: bool = False,
    allow_unauthenticated: bool = False,
    port_file: Path | None = None,
) -> None:
    """Serve Streamable HTTP, SSE, health, metrics and the status page with uvicorn."""
    check_libraries(config, transport="http", stateless=stateless)
    http = config.hub.http
    # An interpolated token that came out empty ("${MCP_HUB_TOKEN}" unset to "") is no token.
    tokens = [t for _, t in http.token_entries()]
    signed_in = bool(tokens) or config.auth is not None
    check_bind(host, tokens or ([config.auth.issuer] if config.auth else []), allow_unauthenticated)
    listener = runtime.Listener("http", host, signed_in)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    actual_port = sock.getsockname()[1]
    import uvicorn

    from mcp_hub.downstream.http.app import build_app, describe_endpoints
    from mcp_hub.downstream.http.limits import ConnectionLimits, limited_protocol

    async with Hub(config) as hub:
        hub.runtime.listener = listener
        app = build_app(hub, host=host, http=http, stateless=stateless)
        limits = ConnectionLimits.from_config(http)
        uv_config = uvicorn.Config(
            app, log_config=None, access_log=False, lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SECONDS, server_header=False,
            limit_concurrency=None, http=limited_protocol(limits),
            # X-Forwarded-* are believed only from [hub.http] trusted_proxies (downstream.forwarded).
            proxy_headers=False,
        )
        server = _uvicorn_server(uv_config)
        endpoints = describe_endpoints(host, actual_port, list(config.profiles))
        print(
            f"mcp-hub listening on {endpoints['streamable_http']} "
            f"(SSE: {endpoints['sse']}, status: {endpoints['status']})",
            file=sys.stderr, flush=True,
        )
        from mcp_hub.clients.launch import connect_hint

        for line in connect_hint(endpoints["streamable_http"], config.source, tokens=bool(tokens)):
            print(line, file=sys.stderr, flush=True)
        if port_file is not None:
            await anyio.Path(port_file).write_text(str(actual_port))
        async with anyio.create_task_group() as tg:
            _start_reloaders(hub, tg)

            def stop() -> None:
                server.should_exit = True

            tg.start_soon(drain_on_signals, hub.drain, config.hub.drain_seconds, stop)
            await server.serve(sockets=[sock])
            tg.cancel_scope.cancel()
