"""``/connect/NAME`` and ``/connect/callback``: where a person connects an account.

A per-user upstream (``oauth_per_user = true``) sends a caller who has not
connected yet to ``/connect/NAME?t=TICKET``. The ticket is the proof of identity
here (a browser carries no bearer token): signed by the hub, bound to the
identity that asked, short-lived and single-use. The page redirects to the
upstream's authorization server and sets an HttpOnly cookie that binds this
browser to the flow; ``/connect/callback`` accepts the redirect back only with
that cookie and the flow's ``state``. The Hub does the OAuth work.
"""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from mcp_hub.hub import Hub

__all__ = ["CONNECT_PREFIX", "connect_routes"]

CONNECT_PREFIX = "/connect/"
_COOKIE = "mcp_hub_connect"
#: The ticket and the code are in these URLs: no caching, no Referer.
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def _base(request: Request, public_url: str | None) -> str:
    if public_url:
        return public_url.rstrip("/")
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


def _page(status: int, text: str) -> Response:
    body = f"<!doctype html><title>mcp-hub</title><p>{html.escape(text)}</p>"
    return HTMLResponse(body, status_code=status, headers=_HEADERS)


def connect_routes(hub: Hub, public_url: str | None) -> list[Route]:
    """The two routes; they answer 404 unless a per-user server is configured."""

    async def callback(request: Request) -> Response:
        query = {k: v for k, v in request.query_params.items()}
        answer = await hub.per_user.finish(query, request.cookies.get(_COOKIE))
        response = _page(answer.status, answer.message)
        response.delete_cookie(_COOKIE, path="/connect")
        return response

    async def connect(request: Request) -> Response:
        name = request.path_params["name"]
        ticket = request.query_params.get("t", "")
        answer = await hub.per_user.open_link(name, ticket, _base(request, public_url))
        if answer.location is None:
            return _page(answer.status, answer.message)
        response = RedirectResponse(answer.location, status_code=302, headers=_HEADERS)
        if answer.cookie is not None:
            response.set_cookie(_COOKIE, answer.cookie, max_age=600, path="/connect",
                                httponly=True, samesite="lax",
                                secure=request.url.scheme == "https")
        return response

    return [Route("/connect/callback", endpoint=callback, methods=["GET"]),
            Route("/connect/{name}", endpoint=connect, methods=["GET"])]
