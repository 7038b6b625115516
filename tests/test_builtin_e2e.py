"""The builtin tools through a real downstream client talking to a real hub process.

The hub runs as ``mcp-hub serve`` over stdio with the echo fixture as its upstream
(``prefix = ""``), file roots and the terminal enabled; the client is the SDK's
``ClientSession``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData, TextContent

from tests.hubtest import echo_server_toml, stdio_hub, write_config

# The hub process imports the whole serving side; skip until all of it is importable.
pytest.importorskip("mcp_hub.downstream.runners")

pytestmark = pytest.mark.anyio


def hub_config(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    root.mkdir()
    body = echo_server_toml("echo", prefix="") + (
        "\n[builtins.file]\n"
        f"roots = [{json.dumps(str(root))}]\n"
        "\n[builtins.terminal]\n"
        "enabled = true\n"
        f"cwd = {json.dumps(str(root))}\n"
        "timeout = 1\n"
    )
    return write_config(tmp_path, body), root


def text(result: CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(20):
        return await session.call_tool(name, args)


async def answer_blue(_ctx: Any, params: ElicitRequestParams) -> ElicitResult | ErrorData:
    schema = getattr(params, "requested_schema", {})
    choices = schema.get("properties", {}).get("answer", {}).get("enum")
    return ElicitResult(action="accept", content={"answer": choices[-1] if choices else "blue"})


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[tuple[ClientSession, Path]]:
    config, root = hub_config(tmp_path)
    with anyio.fail_after(30):
        async with stdio_hub(config, elicitation_callback=answer_blue) as session:
            yield session, root


async def test_the_builtins_are_listed_next_to_the_upstream_tools(
    hub: tuple[ClientSession, Path],
) -> None:
    session, _root = hub
    with anyio.fail_after(20):
        names = {t.name for t in (await session.list_tools()).tools}
    assert {"hub_status", "clarify", "read_file", "write_file", "search_files",
            "terminal", "echo"} <= names


async def test_clarify_asks_the_client_and_returns_the_answer(
    hub: tuple[ClientSession, Path],
) -> None:
    session, _root = hub
    open_answer = json.loads(text(await call(session, "clarify", {"question": "Colour?"})))
    assert open_answer == {"question": "Colour?", "user_response": "blue"}
    picked = json.loads(text(await call(session, "clarify",
                                        {"question": "Size?", "choices": ["S", "M", "L"]})))
    assert picked["user_response"] == "L"


async def test_clarify_rejects_bad_input_from_a_real_client(
    hub: tuple[ClientSession, Path],
) -> None:
    session, _root = hub
    assert (await call(session, "clarify", {"question": ""})).is_error
    assert (await call(session, "clarify",
                       {"question": "Pick", "choices": ["a", "b", "c", "d", "e"]})).is_error


async def test_clarify_without_client_elicitation_is_not_available(tmp_path: Path) -> None:
    config, _root = hub_config(tmp_path)
    with anyio.fail_after(30):
        async with stdio_hub(config) as session:
            result = await call(session, "clarify", {"question": "Colour?"})
    assert result.is_error
    assert "Clarify not available in this context." in text(result)


async def test_file_tools_refuse_escapes_and_binary_files(
    hub: tuple[ClientSession, Path], tmp_path: Path,
) -> None:
    session, root = hub
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (root / "link.txt").symlink_to(outside)
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    written = await call(session, "write_file", {"path": "a/b.txt", "content": "hello\n"})
    assert json.loads(text(written))["bytes_written"] == 6
    assert text(await call(session, "read_file", {"path": "a/b.txt"})) == "hello\n"
    for path in ("../../etc/passwd", "link.txt", "blob.bin"):
        result = await call(session, "read_file", {"path": path})
        assert result.is_error, path
        assert "secret" not in text(result)


async def test_terminal_caps_output_and_kills_grandchildren_on_timeout(
    hub: tuple[ClientSession, Path],
) -> None:
    session, root = hub
    big = json.loads(text(await call(session, "terminal", {"command": "seq 1 100000"})))
    assert big["truncated"] is True and "output truncated" in big["output"]
    pidfile = root / "grandchild.pid"
    inner = f"sleep 300 & echo $! > {shlex.quote(str(pidfile))}; wait"
    data = json.loads(text(await call(session, "terminal",
                                      {"command": f"sh -c {shlex.quote(inner)}"})))
    assert data["timed_out"] is True
    pid = int(pidfile.read_text())
    with anyio.fail_after(5):
        while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid):
            await anyio.sleep(0.01)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return "Z"


async def test_an_upstream_read_file_with_no_prefix_is_rejected_and_shown_in_hub_status(
    hub: tuple[ClientSession, Path],
) -> None:
    session, root = hub
    (root / "mine.txt").write_text("builtin\n")
    added = await call(session, "add_tool", {"name": "read_file"})
    assert not added.is_error
    with anyio.fail_after(20):
        while True:
            status = json.loads(text(await call(session, "hub_status", {})))
            rejected = [r for r in status["rejected_tools"] if r["name"] == "read_file"]
            if rejected:
                break
            await anyio.sleep(0.05)
    assert rejected[0]["toolset"] == "mcp-echo"
    assert rejected[0]["held_by"] == "file"
    # The builtin still answers.
    assert text(await call(session, "read_file", {"path": "mine.txt"})) == "builtin\n"
    echo = next(u for u in status["upstreams"] if u["name"] == "echo")
    assert echo["state"] == "ready"
