"""Hot reload: a changed servers.toml (or SIGHUP) applies only the difference."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.hubtest import echo_server_toml, http_hub, http_session, write_config

pytestmark = pytest.mark.anyio


async def _status(base: str) -> dict[str, Any]:
    async with httpx2.AsyncClient() as client:
        data: dict[str, Any] = (await client.get(f"{base}/status.json")).json()
        return data


def _upstream(status: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((u for u in status["upstreams"] if u["name"] == name), None)


async def _names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def test_adding_removing_and_changing_servers_applies_only_the_difference(
    tmp_path: Path,
) -> None:
    hub_settings = "watch_config = true\n"
    config = write_config(tmp_path, echo_server_toml("alpha"), hub=hub_settings)
    events: list[anyio.Event] = [anyio.Event()]

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            events[-1].set()
            events.append(anyio.Event())

    def latest() -> anyio.Event:
        return events[-1]

    with anyio.fail_after(120):
        async with http_hub(config, tmp_path) as hub, http_session(
            hub.mcp_url, message_handler=on_message
        ) as session:
            assert "alpha_echo" in await _names(session)
            alpha_since = _upstream(await _status(hub.base), "alpha")["since"]  # type: ignore[index]

            # Add a server.
            write_config(tmp_path, echo_server_toml("alpha") + echo_server_toml("beta"),
                         hub=hub_settings)
            while "beta_echo" not in await _names(session):
                await latest().wait()
            status = await _status(hub.base)
            assert _upstream(status, "alpha")["since"] == alpha_since  # type: ignore[index]

            # Remove it: its tools leave.
            write_config(tmp_path, echo_server_toml("alpha"), hub=hub_settings)
            while any(n.startswith("beta_") for n in await _names(session)):
                await latest().wait()
            assert _upstream(await _status(hub.base), "beta") is None

            # Change alpha: it restarts, its tools come back.
            write_config(tmp_path, echo_server_toml("alpha", env={"CHANGED": "1"}),
                         hub=hub_settings)
            while True:
                up = _upstream(await _status(hub.base), "alpha")
                if up is not None and up["since"] != alpha_since and up["state"] == "ready":
                    break
                await anyio.sleep(0.05)
            while "alpha_echo" not in await _names(session):
                await latest().wait()
            result = await session.call_tool("alpha_env", {"name": "CHANGED"})
            assert result.content[0].text == "1"  # type: ignore[union-attr]


async def test_an_invalid_file_keeps_the_running_config_and_names_the_key(tmp_path: Path) -> None:
    hub_settings = "watch_config = true\n"
    config = write_config(tmp_path, echo_server_toml("alpha"), hub=hub_settings)
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, http_session(hub.mcp_url) as session:
            config.write_text(config.read_text() + "\n[servers.bad]\ncommand = 'x'\nargz = []\n")
            while "servers.bad.argz" not in hub.stderr():
                await anyio.sleep(0.05)
            assert "keeping the running config" in hub.stderr()
            result = await session.call_tool("alpha_echo", {"text": "still serving"})
            assert result.content[0].text == "still serving"  # type: ignore[union-attr]


async def test_sighup_reloads_the_config(tmp_path: Path) -> None:
    hub_settings = "watch_config = false\n"
    config = write_config(tmp_path, echo_server_toml("alpha"), hub=hub_settings)
    with anyio.fail_after(90):
        async with http_hub(config, tmp_path) as hub, http_session(hub.mcp_url) as session:
            write_config(tmp_path, echo_server_toml("alpha") + echo_server_toml("gamma"),
                         hub=hub_settings)
            hub.proc.send_signal(signal.SIGHUP)
            while "gamma_echo" not in await _names(session):
                await anyio.sleep(0.05)
            status = await _status(hub.base)
            assert json.dumps(status).count('"gamma"') >= 1
