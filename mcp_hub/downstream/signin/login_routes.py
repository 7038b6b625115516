"""``/login``, ``/login/callback`` and ``/logout``: a browser signs in to the hub.

With ``[auth.browser]`` the hub is an OpenID Connect relying party of the
``[auth]`` issuer (:mod:`mcp_hub.auth.browser`). ``/login?next=PATH`` sends the
browser to the identity provider with a sign-in cookie that binds the answer to
this browser; ``/login/callback`` checks it, verifies the ID token, applies the
``[[access]]`` rules and sets the identity cookie (HttpOnly, SameSite=Lax so it
comes along when a connect link is opened from another application or after the
identity provider's redirect, Secure on https), then returns to ``PATH`` — a
path on this hub only. ``/logout`` drops the cookie. Nothing here is logged but
who signed in; no code, token or cookie value.
"""

from __future__ import annotations

import html
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from mcp_hub.auth.authenticator import COOKIE_NAME, Authenticator, AuthFailure
from mcp_hub.auth.browser import FLOW_SECONDS, SignInError, safe_next

__all__ = ["LOGIN_PATH", "LOGIN_PATHS", "browser_page", "login_routes", "request_base",
           "secure_request"]

logger = logging.getLogger(__name__)

LOGIN_PATH = "/login"
CALLBACK_PATH = "/login/callback"
LOGOUT_PATH = "/logout"
#: Paths a browser reaches before it is signed in.
LOGIN_PATHS = frozenset({LOGIN_PATH, CALLBACK_PATH, LOGOUT_PATH})
_FLOW_COOKIE = "mcp_hub_login"
#: The code and state are in these URLs: no caching, no Referer.
HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def request_base(request: Request, public_url: str | None) -> str:
    """The hub's own origin: ``public_url``, else the request's scheme and Host."""
    if public_url:
        return public_url.rstrip("/")
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"


def secure_request(request: Request, public_url: str | None) -> bool:
    """Whether the browser reached the hub over https (cookies then get ``Secure``); a
    trusted proxy's ``X-Forwarded-Proto`` is in the scheme already (:mod:`.forwarded`)."""
    return request.url.scheme == "https" or bool(public_url and public_url.startswith("https://"))


def browser_page(status: int, text: str) -> Response:
    """A one-paragraph HTML page that is never cached."""
    body = f"<!doctype html><title>mcp-hub</title><p>{html.escape(text)}</p>"
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def login_routes(authn: Authenticator, public_url: str | None) -> list[Route]:
    """The three routes; ``/login`` answers 404 without ``[auth.browser]``."""

    async def login(request: Request) -> Response:
        browser = authn.browser
        if browser is None:
            return browser_page(404, "This hub has no browser sign-in ([auth.browser]).")
        redirect = f"{request_base(request, public_url)}{CALLBACK_PATH}"
        try:
            url, flow = await browser.begin(redirect, safe_next(request.query_params.get("next")))
        except SignInError as exc:
            return browser_page(exc.status, str(exc))
        response = RedirectResponse(url, status_code=302, headers=HEADERS)
        response.set_cookie(_FLOW_COOKIE, flow, max_age=int(FLOW_SECONDS), path=LOGIN_PATH,
                            httponly=True, samesite="lax",
                            secure=secure_request(request, public_url))
        return response

    async def callback(request: Request) -> Response:
        browser = authn.browser
        if browser is None:
            return browser_page(404, "This hub has no browser sign-in ([auth.browser]).")
        query = dict(request.query_params.items())
        try:
            identity, back = await browser.finish(query, request.cookies.get(_FLOW_COOKIE))
            authn.admit(identity)
        except SignInError as exc:
            response = browser_page(exc.status, str(exc))
        except AuthFailure as failure:
            who = failure.identity.name if failure.identity else "this identity"
            logger.warning("browser sign-in of %s refused: no access rule admits it", who)
            response = browser_page(403, f"You signed in as {who}, but no access rule of this "
                                         "hub admits that identity.")
        else:
            value, seconds = authn.identity_cookie(identity, "oidc")
            response = RedirectResponse(back, status_code=303, headers=HEADERS)
            response.set_cookie(COOKIE_NAME, value, max_age=seconds, path="/", httponly=True,
                                samesite="lax", secure=secure_request(request, public_url))
            logger.info("%s signed in with a browser", identity.name)
        response.delete_cookie(_FLOW_COOKIE, path=LOGIN_PATH)
        return response

    async def logout(request: Request) -> Response:
        response = browser_page(200, "Signed out of the hub in this browser.")
        response.delete_cookie(COOKIE_NAME, path="/")
        return response

    return [Route(LOGIN_PATH, endpoint=login, methods=["GET"]),
            Route(CALLBACK_PATH, endpoint=callback, methods=["GET"]),
            Route(LOGOUT_PATH, endpoint=logout, methods=["GET", "POST"])]
