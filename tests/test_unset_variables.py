"""A ``${VAR}`` that is not set parks only the server that names it; the others start."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError
from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio

HINT = "environment variable MISSING_HUB_TEST_TOKEN is not set (set it, or write " \
       "${MISSING_HUB_TEST_TOKEN:-default})"


def test_only_the_server_naming_the_variable_is_marked() -> None:
    config = parse_config(
        '[servers.ok]\ncommand = "x"\n'
        '[servers.gh]\ncommand = "x"\nenv = { T = "${MISSING_HUB_TEST_TOKEN}" }\n'
        '[servers.remote]\nurl = "${MISSING_HUB_TEST_URL}"\n', environ={})
    assert config.servers["ok"].unset_variable is None
    assert config.servers["gh"].unset_variable == f"env.T: {HINT}"
    assert "MISSING_HUB_TEST_URL is not set" in (config.servers["remote"].unset_variable or "")


def test_an_unset_variable_outside_the_servers_still_stops_the_load() -> None:
    with pytest.raises(ConfigError, match=r"hub\.state_dir: environment variable X_UNSET_Q"):
        parse_config('[hub]\nstate_dir = "${X_UNSET_Q}"\n', environ={})


async def test_the_hub_parks_the_server_with_the_reason_and_serves_the_others(
        tmp_path: Path) -> None:
    body = (echo_server_toml("ok") + echo_server_toml(
        "gh", env={"GITHUB_TOKEN": "${MISSING_HUB_TEST_TOKEN}"}))
    config = write_config(tmp_path, body)
    async with http_hub(config, tmp_path) as hub:
        async with http_session(hub.mcp_url) as session:
            names = {t.name for t in (await session.list_tools()).tools}
        assert any(n.startswith("ok_") for n in names)
        assert not any(n.startswith("gh_") for n in names)
        async with httpx2.AsyncClient() as client:
            with anyio.fail_after(20):
                status = (await client.get(f"{hub.base}/status.json")).json()
        servers = {s["name"]: s for s in status["upstreams"]}
        assert servers["ok"]["state"] == "ready"
        assert servers["gh"]["state"] == "parked"
        assert servers["gh"]["last_error"] == f"env.GITHUB_TOKEN: {HINT}"
