"""Streamable HTTP and SSE upstreams (uvicorn subprocesses): connect, call, survive a restart."""

from __future__ import annotations

import anyio
import pytest

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import ServerState
from tests.fixtures_upstream import free_port, http_upstream, is_state, running, text_of

pytestmark = pytest.mark.anyio


def _block(name: str, transport: str, port: int, extra: str = "") -> str:
    path = "mcp" if transport == "http" else "sse"
    return (f'[servers.{name}]\nurl = "http://127.0.0.1:{port}/{path}"\n'
            f'transport = "{transport}"\nkeepalive_interval = 0.5\n{extra}\n')


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_network_upstreams_list_and_call(transport: str) -> None:
    port = free_port()
    with anyio.fail_after(60):
        async with (
            http_upstream(transport, port),
            running(_block("net", transport, port)) as (manager, registry),
        ):
            status = manager.statuses()[0]
            assert status.state is ServerState.READY, status.last_error
            assert status.transport == transport
            assert "net_echo" in registry
            result = await registry.dispatch("net_add", {"a": 1, "b": 2},
                                             call=CallContext())
            assert result.structured_content == {"sum": 3}
            await registry.dispatch("net_add_tool", {"name": "fresh"}, call=CallContext())
            await manager.wait_until(lambda: "net_fresh" in registry)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_killed_and_restarted_network_upstream_is_reconnected(transport: str) -> None:
    port = free_port()
    with anyio.fail_after(90):
        async with (
            http_upstream(transport, port) as (_, proc),
            running(_block("net", transport, port)) as (manager, registry),
        ):
            assert "net_echo" in registry
            proc.kill()
            await proc.wait()
            await manager.wait_until(lambda: "net_echo" not in registry)
            assert manager.statuses()[0].state is not ServerState.READY
            async with http_upstream(transport, port):
                await manager.wait_until(is_state(manager, "net", ServerState.READY))
                result = await registry.dispatch("net_echo", {"text": "again"},
                                                 call=CallContext())
                assert text_of(result) == "again"


async def test_an_http_401_parks_the_server() -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def deny(request: object) -> PlainTextResponse:
        return PlainTextResponse("no", status_code=401)

    app = Starlette(routes=[Route("/mcp", deny, methods=["GET", "POST", "DELETE"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    body = (f'[servers.locked]\nurl = "http://127.0.0.1:{port}/mcp"\n'
            'headers = { Authorization = "Bearer sk-secret-token-123456" }\n')
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve)
            while not server.started:
                await anyio.sleep(0.02)  # uvicorn exposes no started event
            async with running(body) as (manager, _):
                status = manager.statuses()[0]
                assert status.state is ServerState.PARKED
                assert status.last_error is not None
                assert "HTTP 401" in status.last_error
                assert "sk-secret" not in status.last_error
            server.should_exit = True


async def test_an_unknown_http_session_reinitialises_and_the_call_goes_through() -> None:
    port = free_port()
    # HTTP sessions (and their 404) exist on the handshake era only.
    body = _block("net", "http", port, 'protocol = "2025"').replace(
        "keepalive_interval = 0.5", "keepalive_interval = 0")
    with anyio.fail_after(90):
        async with http_upstream("http", port) as (_, proc), running(body) as (
            manager, registry,
        ):
            conn = manager.connection("net")
            assert conn is not None
            proc.kill()
            await proc.wait()
            async with http_upstream("http", port):
                # The new process has never seen the hub's session: it answers 404,
                # which re-initialises, and the call (which never ran) is sent again.
                result = await registry.dispatch("net_fail", {"message": "ran"},
                                                 call=CallContext())
                assert text_of(result) == "ran"
                assert conn.reconnects >= 1


async def test_over_streamable_http_a_request_goes_only_to_the_client_that_caused_it() -> None:
    from tests.test_upstream_relay import Client

    port = free_port()
    with anyio.fail_after(60):
        async with (
            http_upstream("http", port),
            # Server-initiated requests within a call: the handshake era.
            running(_block("net", "http", port, 'protocol = "2025"')) as (_, registry),
        ):
            capable = Client("capable")
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: registry.dispatch(
                    "net_slow", {"seconds": 30, "steps": 300}, call=capable))
                await capable.arrived.wait()
                # A capable call is in flight, but this caller cannot sample: on HTTP the
                # hub knows whose request it is and does not borrow the other client.
                result = await registry.dispatch("net_sample", {"prompt": "hi"},
                                                 call=Client("plain", capable=False))
                assert result.is_error
                assert "cannot relay sampling/createMessage" in text_of(result)
                sampled = await registry.dispatch("net_sample", {"prompt": "hi"},
                                                  call=Client("mine"))
                assert text_of(sampled) == "sampled[m]: from mine"
                tg.cancel_scope.cancel()
