"""One MCP client session with an upstream, authenticated by an ``httpx`` OAuth provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp.client.session import ClientSession, LoggingFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from mcp_hub.config.model import ServerConfig
from mcp_hub.upstream.sessions.lenient import upstream_session
from mcp_hub.upstream.sessions.ndjson import ndjson_hook

__all__ = ["list_tools", "user_session"]

_MAX_PAGES = 100


@asynccontextmanager
async def user_session(config: ServerConfig, auth: httpx2.Auth, *,
                       init_seconds: float, logging_callback: LoggingFnT | None = None,
                       **callbacks: Any) -> AsyncIterator[ClientSession]:
    """An initialized session with ``config.url``; ``auth`` adds (and refreshes) the token;
    the upstream's log messages go to ``logging_callback``, and its requests to the
    ``sampling_callback``, ``elicitation_callback`` and ``list_roots_callback`` given."""
    assert config.url is not None
    read_timeout = max(config.max_call_seconds, 300.0)
    async with AsyncExitStack() as stack:
        streams: Any
        if config.transport == "sse":
            streams = await stack.enter_async_context(sse_client(
                config.url, headers=dict(config.headers) or None,
                timeout=config.connect_timeout, sse_read_timeout=read_timeout, auth=auth))
        else:
            # An answer written as newline-delimited JSON is read line by line.
            hooks = {"response": [ndjson_hook(config.url, config.max_message_bytes)]}
            client = httpx2.AsyncClient(
                headers=dict(config.headers) or None, auth=auth, event_hooks=hooks,
                timeout=httpx2.Timeout(config.connect_timeout, read=read_timeout))
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client))
        read, write = streams[0], streams[1]
        session = await stack.enter_async_context(upstream_session(
            read, write, server=config.url, logging_callback=logging_callback, **callbacks))
        with anyio.fail_after(init_seconds):
            await session.initialize()
        yield session


async def list_tools(session: ClientSession) -> list[types.Tool]:
    """Every page of the session's tools."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
