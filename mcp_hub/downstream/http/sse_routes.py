"""Legacy SSE endpoints for one server: ``PREFIX/sse`` (the stream) and ``PREFIX/messages/``.

The default server is served at ``/sse``; each profile at ``/p/NAME/sse``, so a
profile restricts SSE clients exactly as it restricts ``/p/NAME/mcp``.
"""

from __future__ import annotations

from uuid import uuid4

from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from mcp_hub.downstream.http.session_pool import SessionPool
from mcp_hub.downstream.server import HubServer

__all__ = ["sse_endpoints"]


def sse_endpoints(server: HubServer, prefix: str, security: TransportSecuritySettings,
                  pool: SessionPool, max_body: int) -> list[Route | Mount]:
    """The two routes of one SSE endpoint under ``prefix`` ("" or "/p/NAME").

    Each open stream is a session of ``pool``: it counts against the hub's one
    session cap and is listed in status. A message's body is bounded by ``max_body``
    (:class:`~mcp_hub.downstream.http.body.BodyLimit` above has read it by then).
    """
    sse = SseServerTransport(f"{prefix}/messages/", security_settings=security,
                             max_request_body_size=max_body)

    async def handle_sse(request: Request) -> Response:
        if not pool.make_room():
            return JSONResponse({"error": "too many open sessions"}, status_code=503)
        key = uuid4().hex
        pool.add(key, f"{prefix}/sse")
        try:
            async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
                await server.run(streams[0], streams[1], server.create_initialization_options())
        finally:
            pool.forget(key)
        return Response()

    return [
        Route(f"{prefix}/sse", endpoint=handle_sse, methods=["GET"]),
        Mount(f"{prefix}/messages/", app=sse.handle_post_message),
    ]
