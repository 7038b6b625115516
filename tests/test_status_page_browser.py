"""The status page at ``/`` in a real browser (headless Debian Chromium).

A hub process serves HTTP with the echo upstream and an auth token. The page
sits behind the same auth as ``/mcp``; a browser cannot send a bearer header,
so it opens ``/?token=T`` once, which answers 303 to ``/`` and sets the
``mcp_hub_token`` cookie (HttpOnly, SameSite=Strict) that ``/`` and
``/status.json`` then accept. The test checks that exchange, that the page
renders the upstream row (name, state, tool count) and the recent calls, that
it refreshes itself when a new call happens, and takes a screenshot.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.browser import launch, unavailable
from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(unavailable() is not None, reason=unavailable() or ""),
]

TOKEN = "status-page-token-0123456789abcdef"
COOKIE = "mcp_hub_token"


async def test_status_page_in_headless_chromium(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml("echo"),
                          hub=f'[hub.http]\nauth_tokens = ["{TOKEN}"]\n')
    async with http_hub(config, tmp_path) as hub:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        async with http_session(hub.mcp_url, headers=auth) as session:
            result = await session.call_tool("echo_echo", {"text": "from the browser test"})
            assert not result.is_error

        # The exchange at the HTTP level first: no token → 401; ?token= → 303 + cookie.
        async with httpx2.AsyncClient(follow_redirects=False) as client:
            with anyio.fail_after(10):
                assert (await client.get(f"{hub.base}/")).status_code == 401
                assert (await client.get(f"{hub.base}/?token=wrong")).status_code == 401
                r = await client.get(f"{hub.base}/?token={TOKEN}")
            assert r.status_code == 303 and r.headers["location"] == "/"
            set_cookie = r.headers["set-cookie"]
            assert set_cookie.startswith(f"{COOKIE}=")
            assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie

        with anyio.fail_after(90):
            async with launch() as browser:
                # A browser without the cookie is refused, page and JSON alike.
                stranger = await browser.new_context()
                page = await stranger.new_page()
                response = await page.goto(f"{hub.base}/")
                assert response is not None and response.status == 401
                response = await page.goto(f"{hub.base}/status.json")
                assert response is not None and response.status == 401
                await stranger.close()

                context = await browser.new_context(viewport={"width": 1280, "height": 900})
                page = await context.new_page()
                page.set_default_timeout(20_000)
                response = await page.goto(f"{hub.base}/?token={TOKEN}")
                assert response is not None and response.status == 200
                # Redirected to the bare page: the token is gone from the address bar …
                assert page.url == f"{hub.base}/"
                assert response.request.redirected_from is not None
                # … and lives in an HttpOnly, SameSite=Strict cookie scripts cannot read.
                (cookie,) = [c for c in await context.cookies() if c["name"] == COOKIE]
                assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict"
                assert COOKIE not in await page.evaluate("document.cookie")

                # The upstream row renders with its name, state and tool count.
                row = page.locator("#ups tbody tr", has_text="echo")
                await row.locator(".st.ready").wait_for()
                cells = [c.strip() for c in await row.locator("td").all_inner_texts()]
                assert cells[0] == "echo" and cells[1] == "ready" and cells[2] == "stdio"
                assert int(cells[3]) >= 5
                calls = page.locator("#calls tbody tr", has_text="echo_echo")
                await calls.first.wait_for()
                assert "ok" in (await calls.first.inner_text())
                hub_line = await page.locator("#hub").inner_text()
                assert "mcp-hub" in hub_line and "tools" in hub_line
                assert "mode" in await page.locator("#ts").inner_text()
                # The page's own fetches of /status.json carry the cookie.
                status = await page.evaluate(
                    "fetch('status.json', {credentials: 'same-origin'}).then(r => r.status)")
                assert status == 200

                # It refreshes itself: a new call shows up without a reload.
                async with http_session(hub.mcp_url, headers=auth) as session:
                    await session.call_tool("echo_add", {"a": 2, "b": 40})
                await page.locator("#calls tbody tr", has_text="echo_add").wait_for()

                shot = tmp_path / "status-page.png"
                await page.screenshot(path=str(shot), full_page=True)
                await context.close()

        assert shot.stat().st_size > 10_000
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        keep = os.environ.get("MCP_HUB_SCREENSHOT_DIR")
        if keep:  # CI keeps the screenshot as an artifact
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(keep) / shot.name)
        print(f"status page screenshot: {shot}")
        assert TOKEN not in hub.stderr()
