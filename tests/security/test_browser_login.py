"""Browser sign-in at the hub, and what it guards: connect links and the status page.

Real parts only: oauth2-mock-server signs the hub's people in (``[auth]`` and its
``[auth.browser]`` relying party; ``/test/login`` picks who the next sign-in is),
a second one is the per-user upstream's authorization server, the upstream is an
SDK server that checks every token, and the hub runs as a process. The browser
is an HTTP client that follows redirects and keeps cookies.

* Mallory triggers a per-user server, gets her connect link and sends it to
  Alice: Alice's browser signs in to the hub as Alice and the link is refused
  (403); nothing is exchanged at the upstream's authorization server and nothing
  is stored under Mallory. Sending Alice the authorization server's URL of a flow
  Mallory began fails too (the callback needs Mallory's browser). Alice's own link,
  in the same browser, connects her.
* The identity cookie obeys ``[[access]]``: a static token the rules refuse on a
  header is refused at ``/?token=T`` too, a cookie stops working when the rules
  stop admitting its identity, and a raw token in the cookie opens nothing.
* A browser that signs in sees the status page; the sign-in answer is accepted only
  in the browser that began it.
* A link made for a static token's identity is proven with the ``/?token=`` cookie.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import URL_ELICITATION_REQUIRED

from mcp_hub.auth.authenticator import COOKIE_NAME, Authenticator, AuthFailure
from mcp_hub.auth.browser import safe_next
from mcp_hub.auth.cookies import FLOW, IDENTITY, SealedCookies
from mcp_hub.auth.identity import Identity
from mcp_hub.auth.settings import AccessRule
from mcp_hub.config.model import load_config
from mcp_hub.upstream.oauth.attach import token_store
from tests.auth_support import AuthServer, bearer, browser_hub_config, oauth_server
from tests.hubtest import HttpHub, http_hub, http_session, text_of
from tests.oauth_parts import per_user_hub, per_user_server_toml

pytestmark = pytest.mark.anyio

OPS = "ops-token-0123456789abcdef"
CI = "ci-token-0123456789abcdef"
RULES = '[[access]]\nmatch = "sub:alice"\n\n[[access]]\nmatch = "sub:mallory"\n\n' \
        '[[access]]\nmatch = "token:ops"\n'


def _config(tmp: Path, issuer: str, *, upstream: str | None = None, rules: str = RULES) -> Path:
    tokens = (f'[hub.http]\nauth_tokens = [{{ name = "ops", token = "{OPS}" }}, '
              f'{{ name = "ci", token = "{CI}" }}]\n\n')
    server = per_user_server_toml(upstream) if upstream else ""
    return browser_hub_config(tmp, issuer, body=tokens + server, tail=rules)


async def _connect_link(hub: HttpHub, headers: dict[str, str]) -> str:
    """The connect URL a per-user tool's -32042 error gives a client without URL elicitation."""
    async with http_session(hub.mcp_url, headers=headers) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        with pytest.raises(MCPError) as caught:
            await session.call_tool("p_whoami" if "p_whoami" in names else "p_connect", {})
    assert caught.value.error.code == URL_ELICITATION_REQUIRED
    data = caught.value.error.data
    assert isinstance(data, dict)
    url = str(data["elicitations"][0]["url"])
    assert url.startswith(f"{hub.base}/connect/prot?t="), url
    return url


async def test_a_link_sent_to_another_user_is_refused_and_the_owner_connects(
        tmp_path: Path) -> None:
    def config(upstream: str, issuer: str) -> Path:
        return _config(tmp_path, issuer, upstream=upstream)

    async with per_user_hub(tmp_path, config) as parts:
        with anyio.fail_after(120):
            await _link_scenario(parts.hub, parts.sign_in, parts.upstream_as.url, parts.config,
                                 parts.calls)


async def _link_scenario(hub: HttpHub, auth: AuthServer, upstream_as: str, path: Path,
                         calls: Path) -> None:
    mallory_h = await bearer(auth, "mallory")
    mallory_link = await _connect_link(hub, mallory_h)
    # Alice's browser: whoever opens /authorize at either server is Alice.
    await auth.login("alice")
    async with httpx2.AsyncClient(timeout=30) as http:
        (await http.post(f"{upstream_as}/test/subject", json={"sub": "gh-alice"})).raise_for_status()
    async with httpx2.AsyncClient(timeout=60, follow_redirects=True) as alice_browser:
        opened = await alice_browser.get(mallory_link)
        assert opened.status_code == 403, opened.text
        assert "made for another user" in opened.text and "signed in to the hub as alice" in opened.text
        # The browser went to sign in at the hub and came back to the link; it never
        # reached the upstream's authorization server.
        visited = [str(r.url) for r in opened.history]
        assert any("/login/callback?" in u for u in visited), visited
        assert not any(u.startswith(upstream_as) for u in visited), visited
        config = load_config(path)
        assert await token_store("prot", config.servers["prot"], "user:mallory").get_tokens() is None
        assert not calls.exists() or calls.read_text() == ""
        # Mallory's client is still asked to connect: her calls never run as Alice.
        again = await _connect_link(hub, mallory_h)
        assert again != mallory_link
        # Mallory opens her link herself and sends Alice the authorization server's URL
        # instead: the redirect back reaches the hub without Mallory's flow cookie.
        await auth.login("mallory")
        async with httpx2.AsyncClient(timeout=60) as mallory_browser:
            signed_in = await mallory_browser.get(f"{hub.base}/login?next=/", follow_redirects=True)
            assert signed_in.status_code == 200
            started = await mallory_browser.get(again)
            assert started.status_code == 302 and started.headers["location"].startswith(upstream_as)
        finished = await alice_browser.get(started.headers["location"])
        assert finished.status_code == 403 and "another browser" in finished.text, finished.text
        assert await token_store("prot", config.servers["prot"], "user:mallory").get_tokens() is None

        # Alice's own link, in the same signed-in browser, connects Alice.
        alice_h = await bearer(auth, "alice")
        mine = await alice_browser.get(await _connect_link(hub, alice_h))
        assert mine.status_code == 200 and "Connected to prot" in mine.text, mine.text
    assert await token_store("prot", config.servers["prot"], "user:alice").get_tokens() is not None
    assert await token_store("prot", config.servers["prot"], "user:mallory").get_tokens() is None
    async with http_session(hub.mcp_url, headers=alice_h) as session:
        result = await session.call_tool("p_whoami", {})
    assert text_of(result).startswith("sub=gh-alice "), text_of(result)
    assert "Set-Cookie" not in hub.stderr() and "mcp_hub_token=" not in hub.stderr()
    await _a_static_token_proves_itself_with_its_cookie(hub, upstream_as)


async def _a_static_token_proves_itself_with_its_cookie(hub: HttpHub, upstream_as: str) -> None:
    """A link made for ``token:ops`` cannot be proven with OpenID Connect: the page asks for
    the ``/?token=`` cookie, and with it the link connects."""
    link = await _connect_link(hub, {"Authorization": f"Bearer {OPS}"})
    async with httpx2.AsyncClient(timeout=30) as http:
        (await http.post(f"{upstream_as}/test/subject", json={"sub": "gh-ops"})).raise_for_status()
    async with httpx2.AsyncClient(timeout=60, follow_redirects=True) as browser:
        bare = await browser.get(link)
        assert bare.status_code == 401 and "/?token=" in bare.text, bare.text
        back = link.removeprefix(hub.base)
        done = await browser.get(f"{hub.base}/", params={"token": OPS, "next": back})
        assert done.status_code == 200 and "Connected to prot" in done.text, done.text
    async with http_session(hub.mcp_url, headers={"Authorization": f"Bearer {OPS}"}) as session:
        result = await session.call_tool("p_whoami", {})
    assert text_of(result).startswith("sub=gh-ops "), text_of(result)


async def test_the_status_cookie_obeys_the_access_rules(tmp_path: Path) -> None:
    async with oauth_server() as auth:
        path = _config(tmp_path, auth.issuer)
        async with http_hub(path, tmp_path) as hub, \
                httpx2.AsyncClient(timeout=30, follow_redirects=False) as http:
            with anyio.fail_after(60):
                # On a header, the rules refuse the ci token.
                header = await http.get(f"{hub.base}/status.json",
                                        headers={"Authorization": f"Bearer {CI}"})
                assert header.status_code == 403
                # Through the status cookie too: no cookie is made for it.
                traded = await http.get(f"{hub.base}/?token={CI}")
                assert traded.status_code == 403 and "set-cookie" not in traded.headers
                # A raw token in the cookie (what the cookie used to hold) opens nothing.
                raw = await http.get(f"{hub.base}/status.json",
                                     headers={"Cookie": f"mcp_hub_token={CI}"})
                assert raw.status_code == 401
                raw_ops = await http.get(f"{hub.base}/status.json",
                                         headers={"Cookie": f"mcp_hub_token={OPS}"})
                assert raw_ops.status_code == 401
                # The ops token is admitted: its cookie holds the identity, not the token.
                ok = await http.get(f"{hub.base}/?token={OPS}")
                assert ok.status_code == 303
                cookie = ok.headers["set-cookie"].split(";")[0]
                assert OPS not in ok.headers["set-cookie"]
                opened = await http.get(f"{hub.base}/status.json", headers={"Cookie": cookie})
                assert opened.status_code == 200
                # The rules change (hot reload): the same cookie is refused, as a header is.
                path.write_text(path.read_text().replace('match = "token:ops"', 'match = "sub:ops"'))
                while True:
                    status = (await http.get(f"{hub.base}/status.json",
                                             headers={"Cookie": cookie})).status_code
                    if status != 200:
                        break
                    await anyio.sleep(0.1)
                assert status == 403
                assert (await http.get(f"{hub.base}/status.json", headers={
                    "Authorization": f"Bearer {OPS}"})).status_code == 403
    assert OPS not in hub.stderr() and CI not in hub.stderr()


async def test_a_signed_in_browser_sees_the_status_page(tmp_path: Path) -> None:
    async with oauth_server() as auth:
        path = _config(tmp_path, auth.issuer)
        async with http_hub(path, tmp_path) as hub:
            with anyio.fail_after(60):
                await auth.login("alice")
                async with httpx2.AsyncClient(timeout=30, follow_redirects=True) as browser:
                    page = await browser.get(f"{hub.base}/")
                    assert page.status_code == 200 and "mcp-hub status" in page.text
                    assert [r.status_code for r in page.history] == [302, 302, 302, 303]
                    set_cookie = page.history[-1].headers["set-cookie"]
                    assert "HttpOnly" in set_cookie and "SameSite=lax" in set_cookie
                    assert (await browser.get(f"{hub.base}/status.json")).status_code == 200
                    # The cookie opens the status page only.
                    assert (await browser.get(f"{hub.base}/metrics")).status_code == 401
                    assert (await browser.post(f"{hub.base}/mcp", json={})).status_code == 401
                    await browser.get(f"{hub.base}/logout")
                    assert (await browser.get(f"{hub.base}/status.json")).status_code == 401

                # Someone no rule admits signs in: refused, and no identity cookie.
                await auth.login("eve")
                async with httpx2.AsyncClient(timeout=30, follow_redirects=True) as browser:
                    page = await browser.get(f"{hub.base}/")
                    assert page.status_code == 403 and "eve" in page.text
                    assert "mcp_hub_token" not in browser.cookies
                    assert (await browser.get(f"{hub.base}/status.json")).status_code == 401

                # The identity provider's answer works only in the browser that began.
                await auth.login("alice")
                async with httpx2.AsyncClient(timeout=30) as first, \
                        httpx2.AsyncClient(timeout=30) as other:
                    begun = await first.get(f"{hub.base}/login?next=/")
                    assert begun.status_code == 302
                    answer = await first.get(begun.headers["location"])
                    callback = answer.headers["location"]
                    assert callback.startswith(f"{hub.base}/login/callback?")
                    stolen = await other.get(callback)
                    assert stolen.status_code == 400 and "mcp_hub_token" not in other.cookies


async def test_without_browser_sign_in_a_link_of_an_oauth_identity_is_refused(
        tmp_path: Path) -> None:
    async with oauth_server() as auth:
        # The upstream is never reached: the link is refused before any flow begins.
        path = _config(tmp_path, auth.issuer, upstream="http://127.0.0.1:9/mcp", rules="")
        path.write_text(path.read_text().replace('[auth.browser]\nclient_id = "hub-browser"\n', ""))
        async with http_hub(path, tmp_path) as hub:
            with anyio.fail_after(60):
                link = await _connect_link(hub, await bearer(auth, "alice"))
                async with httpx2.AsyncClient(timeout=30, follow_redirects=True) as browser:
                    opened = await browser.get(link)
                    assert opened.status_code == 401 and "[auth.browser]" in opened.text
                    assert (await browser.get(f"{hub.base}/login")).status_code == 404
    assert "[auth] without [auth.browser]" in hub.stderr()


def test_sealed_cookies_refuse_altered_expired_and_other_kinds() -> None:
    cookies = SealedCookies(b"k" * 32)
    value = cookies.seal({"x": 1}, 60, IDENTITY)
    assert cookies.open(value, IDENTITY) is not None
    assert cookies.open(value, FLOW) is None, "a record of one kind is not another"
    flipped = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
    assert cookies.open(flipped, IDENTITY) is None
    assert cookies.open(cookies.seal({"x": 1}, -1, IDENTITY), IDENTITY) is None
    assert SealedCookies(b"o" * 32).open(value, IDENTITY) is None, "another key opens nothing"


def test_a_token_cookie_ends_with_its_token_and_obeys_the_rules() -> None:
    key = b"k" * 32

    def authn(tokens: list[tuple[str, str]], rules: list[AccessRule]) -> Authenticator:
        return Authenticator(tokens=tokens, auth=None, public_url=None, name="hub",
                             profiles=frozenset, rules=lambda: rules, cookie_key=lambda: key)

    both = authn([("ops", OPS), ("ci", CI)], [AccessRule(match="token:ops")])
    value, _ = both.identity_cookie(Identity.static("ops"), "token")
    found = both.from_cookie(f"other=1; {COOKIE_NAME}={value}")
    assert found is not None and found.name == "token:ops"
    ci_value, _ = both.identity_cookie(Identity.static("ci"), "token")
    with pytest.raises(AuthFailure) as refused:
        both.from_cookie(f"{COOKIE_NAME}={ci_value}")
    assert refused.value.status == 403
    assert authn([("ci", CI)], []).from_cookie(f"{COOKIE_NAME}={value}") is None


@pytest.mark.parametrize(("given", "kept"), [
    ("/connect/prot?t=a.b", "/connect/prot?t=a.b"), ("/", "/"), ("//evil.example", "/"),
    ("https://evil.example/", "/"), ("/\\evil.example", "/"), ("", "/"), (None, "/"),
    ("/x\r\nSet-Cookie: a=b", "/"),
])
def test_sign_in_returns_only_to_a_path_on_the_hub(given: str | None, kept: str) -> None:
    assert safe_next(given) == kept
