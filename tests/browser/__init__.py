"""Headless Chromium for tests: Debian's ``chromium`` driven by Playwright.

Playwright's own browser download is never used: the browser is the system
package (``.ci/install-browser`` installs it and the ``playwright`` Python
package). ``unavailable()`` says why a browser test cannot run, for a skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.async_api import Browser

__all__ = ["CHROMIUM_ARGS", "chromium_path", "launch", "unavailable"]

# Flags for a quiet, sandbox-free headless run in containers and CI.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--metrics-recording-only",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
]


def chromium_path() -> str | None:
    """The system Chromium: ``$CHROMIUM`` or Debian's ``/usr/bin/chromium``."""
    explicit = os.environ.get("CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if chromium_path() is None:
        return "no system Chromium (run .ci/install-browser: apt-get install chromium)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing (run .ci/install-browser)"
    return None


@asynccontextmanager
async def launch() -> AsyncIterator[Browser]:
    """A headless system Chromium under Playwright, closed on exit."""
    from playwright.async_api import async_playwright

    path = chromium_path()
    assert path is not None, unavailable()
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=path, headless=True,
                                           args=CHROMIUM_ARGS, timeout=30_000)
        try:
            yield browser
        finally:
            await browser.close()
