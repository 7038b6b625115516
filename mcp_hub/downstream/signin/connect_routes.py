"""``/connect/NAME`` and ``/connect/callback``: where a person connects an account.

A per-user upstream (``oauth_per_user = true``) sends a caller who has not
connected yet to ``/connect/NAME?t=TICKET``. The ticket (signed by the hub,
bound to the identity that asked, short-lived and single-use) says whose link it
is; the browser's identity cookie (an OpenID Connect sign-in at ``/login``, or a
static token traded at ``/?token=T``) says who opened it. The flow begins only
when the two are the same identity: a browser not signed in is sent to sign in
and back (or told how, for a static token), one signed in as someone else gets
a 403 page and nothing is stored. The page then redirects to the upstream's
authorization server and sets an HttpOnly cookie that binds this browser to the
flow; ``/connect/callback`` accepts the redirect back only with that cookie and
the flow's ``state``. The Hub does the OAuth work.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mcp_hub.auth.authenticator import Authenticator, AuthFailure
from mcp_hub.downstream.signin.login_routes import (
    HEADERS,
    LOGIN_PATH,
    browser_page,
    request_base,
    secure_request,
)
from mcp_hub.hub.interface import ServingHub

__all__ = ["CONNECT_PREFIX", "connect_routes"]

CONNECT_PREFIX = "/connect/"
_COOKIE = "mcp_hub_connect"


def _signed_in(authn: Authenticator, request: Request) -> str | None:
    """The identity name of the browser's identity cookie (AuthFailure when rules refuse it)."""
    identity = authn.from_cookie(request.headers.get("cookie", ""))
    return identity.name if identity is not None else None


def connect_routes(hub: ServingHub, public_url: str | None, authn: Authenticator) -> list[Route]:
    """The two routes; they answer 404 unless a per-user server is configured."""

    async def callback(request: Request) -> Response:
        query = {k: v for k, v in request.query_params.items()}
        answer = await hub.finish_connect(query, request.cookies.get(_COOKIE))
        response = browser_page(answer.status, answer.message)
        response.delete_cookie(_COOKIE, path="/connect")
        return response

    async def connect(request: Request) -> Response:
        name = request.path_params["name"]
        ticket = request.query_params.get("t", "")
        try:
            signed_in = _signed_in(authn, request)
        except AuthFailure as failure:
            return browser_page(failure.status, "No access rule of this hub admits the identity this "
                                         "browser is signed in as. Nothing was connected.")
        answer = await hub.open_connect_link(name, ticket, request_base(request, public_url), signed_in)
        if answer.sign_in and authn.browser is None:
            return browser_page(401, "This hub has no browser sign-in ([auth.browser]), so it "
                                     "cannot tell who opened this link. Nothing was connected.")
        if answer.sign_in:
            back = request.url.path + ("?" + request.url.query if request.url.query else "")
            return RedirectResponse(f"{LOGIN_PATH}?{urlencode({'next': back})}", status_code=302,
                                    headers=HEADERS)
        if answer.location is None:
            return browser_page(answer.status, answer.message)
        response = RedirectResponse(answer.location, status_code=302, headers=HEADERS)
        if answer.cookie is not None:
            response.set_cookie(_COOKIE, answer.cookie, max_age=600, path="/connect",
                                httponly=True, samesite="lax",
                                secure=secure_request(request, public_url))
        return response

    return [Route("/connect/callback", endpoint=callback, methods=["GET"]),
            Route("/connect/{name}", endpoint=connect, methods=["GET"])]
