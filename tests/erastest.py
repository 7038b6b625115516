"""Helpers for the protocol-era tests: the asking upstream, client callbacks, clients.

Every client here is the SDK's high-level ``Client``: ``mode="legacy"`` is a
2025 handshake-era client, ``mode="auto"`` negotiates 2026-07-28 with the hub.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.fixtures_upstream import free_port, wait_port
from tests.hubtest import PY, ROOT, http_hub, hub_env

ASKING = ["-m", "tests.fixtures_upstream.asking_server"]
MODERN = ["-m", "tests.fixtures_upstream.modern_server"]


def asking_toml(name: str = "ask") -> str:
    """A ``[servers.NAME]`` block running the asking fixture over stdio."""
    return (f"[servers.{name}]\ncommand = \"{PY}\"\n"
            f"args = {ASKING!r}\n".replace("'", '"') + f'cwd = "{ROOT}"\n')


def modern_toml(name: str = "mod", protocol: str = "2026") -> str:
    """A ``[servers.NAME]`` block running the 2026-07-28-only fixture over stdio."""
    return (f"[servers.{name}]\ncommand = \"{PY}\"\n"
            f"args = {MODERN!r}\n".replace("'", '"') + f'cwd = "{ROOT}"\n'
            f'protocol = "{protocol}"\n')


def direct_modern_client(**kwargs: Any) -> Client:
    """A 2026-07-28 client straight to the modern fixture (the reference results)."""
    params = StdioServerParameters(command=PY, args=MODERN, cwd=str(ROOT), env=hub_env())
    return Client(params, mode="auto", **CALLBACKS, **kwargs)


@asynccontextmanager
async def asking_over_http(fixture: list[str] = ASKING, name: str = "ask", extra: str = ""
                           ) -> AsyncIterator[str]:
    """A fixture on Streamable HTTP; yields its ``[servers.NAME]`` block."""
    port = free_port()
    proc = await anyio.open_process([PY, *fixture, "--port", str(port)], cwd=ROOT)
    try:
        await wait_port(port, proc)
        yield (f'[servers.{name}]\nurl = "http://127.0.0.1:{port}/mcp"\n'
               f'transport = "http"\n{extra}')
    finally:
        if proc.returncode is None:
            proc.kill()
        with anyio.CancelScope(shield=True):
            await proc.wait()


async def on_sampling(ctx: Any, params: types.CreateMessageRequestParams
                      ) -> types.CreateMessageResult:
    first = params.messages[0].content
    text = first.text if isinstance(first, types.TextContent) else "?"
    return types.CreateMessageResult(role="assistant", model="m1",
                                     content=types.TextContent(text=f"echo:{text}"))


async def on_elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    if isinstance(params, types.ElicitRequestURLParams):
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content={"answer": "bob"})


async def on_roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/one", name="one")])


CALLBACKS: dict[str, Any] = {
    "sampling_callback": on_sampling,
    "elicitation_callback": on_elicit,
    "list_roots_callback": on_roots,
}


def direct_client(**kwargs: Any) -> Client:
    """A 2025 client straight to the asking fixture (the reference results)."""
    params = StdioServerParameters(command=PY, args=ASKING, cwd=str(ROOT), env=hub_env())
    return Client(params, mode="legacy", **CALLBACKS, **kwargs)


@asynccontextmanager
async def hub_client(transport: str, mode: str, config: Path, tmp: Path,
                     **kwargs: Any) -> AsyncIterator[Client]:
    """The SDK ``Client`` in ``mode`` through a real hub process on ``transport``."""
    options = {**CALLBACKS, **kwargs}
    if transport == "http":
        async with http_hub(config, tmp) as hub, Client(hub.mcp_url, mode=mode, **options) as c:
            yield c
        return
    params = StdioServerParameters(
        command=PY, args=["-m", "mcp_hub", "serve", "--config", str(config)],
        cwd=str(ROOT), env=hub_env())
    async with Client(params, mode=mode, **options) as client:
        yield client


def accepting(first: types.InputRequiredResult, answer: str) -> dict[str, Any]:
    """An accepted elicitation, ``{"answer": answer}``, for every input request of ``first``."""
    return {k: types.ElicitResult(action="accept", content={"answer": answer})
            for k in first.input_requests or {}}


def text_of(result: Any) -> str:
    """The text of a tool result, prompt result or resource read."""
    if isinstance(result, types.CallToolResult):
        return "".join(b.text for b in result.content if isinstance(b, types.TextContent))
    if isinstance(result, types.GetPromptResult):
        return "".join(m.content.text for m in result.messages
                       if isinstance(m.content, types.TextContent))
    return "".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))


async def list_changed_arrives(client: Client, legacy: bool, prefix: str, name: str) -> None:
    """Add a tool upstream; the client hears of it (listen, or a session notification)."""
    if not legacy:
        async with client.listen(tools_list_changed=True) as sub:
            await client.call_tool(prefix + "add_tool", {"name": name})
            async for _event in sub:
                tools = await client.list_tools(cache_mode="refresh")
                if prefix + name in {t.name for t in tools.tools}:
                    return
        raise AssertionError("the listen stream ended without the new tool")
    await client.call_tool(prefix + "add_tool", {"name": name})
    while prefix + name not in {t.name for t in (await client.list_tools()).tools}:
        await anyio.sleep(0.05)
