"""The tool_search bridge and extension-bearing tools: ``tool_describe`` shows an MCP
Apps tool's ``_meta.ui`` (and a task tool's ``execution``, in tests/test_tasks.py).

MCP Apps tools stay listed beside the bridge tools and are never searched
(tests/test_apps.py); a model that reads one in ``tools/list`` and asks
``tool_describe`` for it gets it described with its app (``_meta.ui``), while an
app-only tool stays unknown to the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.erastest import hub_client, text_of
from tests.test_apps import apps_client_options, apps_config

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("transport", "mode", "upstream"),
                         [("stdio", "legacy", "2025"), ("http", "auto", "auto")])
async def test_tool_describe_shows_an_apps_tool_with_its_meta_ui(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    with anyio.fail_after(120):
        async with apps_config(tmp_path, upstream, '[tool_search]\nmode = "on"\n') as config, \
                hub_client(transport, mode, config, tmp_path, **apps_client_options()) as host:
            described: dict[str, Any] = json.loads(text_of(await host.call_tool(
                "tool_describe", {"names": ["beta_show_dashboard", "beta_refresh_data"]})))
    [tool] = described["tools"]
    assert tool["name"] == "beta_show_dashboard" and tool["server"] == "beta"
    assert tool["_meta"] == {"ui": {"resourceUri": "ui://beta/app.html",
                                    "visibility": ["model", "app"]}}
    assert [n["name"] for n in described["not_found"]] == ["beta_refresh_data"]
