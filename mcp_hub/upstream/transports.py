"""Opening one upstream connection: a stdio child, Streamable HTTP or legacy SSE.

:func:`open_transport` yields the ``(read, write)`` stream pair a
``ClientSession`` runs on. Failures are translated at this boundary into
:class:`ConnectFailure`, which says whether retrying can help: a command that
does not exist, 401/403, or an endpoint that is not MCP are *permanent* (the
supervisor parks the server), everything else is transient (it reconnects).

The stdio transport is the hub's own rather than the SDK's ``stdio_client``
because the hub needs three things that one does not give: the child's stderr
read line by line into the hub's log under the server's name (never onto the
hub's stdout, which may be the downstream stdio transport), a filtered
environment, and an ``on_eof`` signal the moment the child's stdout closes so a
``kill -9`` is noticed at once rather than at the next keepalive.
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import re
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass, field
from subprocess import PIPE
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import httpx2
import mcp.types as types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from mcp_hub.compat.libs import process_transport
from mcp_hub.config import commands
from mcp_hub.config.model import ServerConfig
from mcp_hub.errors import UpstreamError
from mcp_hub.plumbing import pdeathsig
from mcp_hub.redact import redact
from mcp_hub.registry.sanitize import clean_description
from mcp_hub.telemetry import inject_trace_headers
from mcp_hub.upstream.oauth.attach import hub_auth, watch_logout
from mcp_hub.upstream.oauth.errors import login_hint
from mcp_hub.upstream.polling import StreamPolls, watch
from mcp_hub.upstream.sessions.ndjson import ndjson_hook
from mcp_hub.upstream.stdio import prespawn
from mcp_hub.upstream.stdio.prespawn import INHERITED_ENV_VARS, AdoptEarly
from mcp_hub.upstream.stdio.reader import StdoutReadStream, plain_response
from mcp_hub.upstream.stdio.writer import StdinWriteStream

__all__ = [
    "INHERITED_ENV_VARS",
    "INVALID_RESPONSE",
    "ConnectFailure",
    "TransportProbe",
    "child_environment",
    "open_transport",
]

logger = logging.getLogger("mcp_hub.upstream")
stderr_logger = logging.getLogger("mcp_hub.upstream.stderr")

# Shutdown of a stdio child: close stdin, wait, then SIGTERM the group, wait, SIGKILL.
_EXIT_GRACE_SECONDS = 2.0
_TERM_GRACE_SECONDS = 2.0
_POLL_SECONDS = 0.01
_MAX_STDERR_LINE = 2000
#: How the error that replaces a malformed response to a request begins.
INVALID_RESPONSE = "invalid response from upstream"
_ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")


class ConnectFailure(UpstreamError):
    """Connecting failed; ``permanent`` says whether retrying without a change can help."""

    def __init__(self, message: str, *, permanent: bool = False, timed_out: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        #: The child gave no answer within ``connect_timeout`` (its message says how to try it).
        self.timed_out = timed_out


@dataclass
class TransportProbe:
    """What the transport learnt while connecting, for classifying a failure."""

    last_status: int | None = None
    statuses: list[int] = field(default_factory=list)
    #: The last lines the child wrote to stderr (why it died, usually).
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=5))
    #: The stdio child's process id (its process group id too), once spawned.
    pid: int | None = None
    #: Why an OAuth server needs ``mcp-hub login`` (set by its auth), else None.
    needs_login: str | None = None
    #: An OAuth server's watch for its tokens' deletion (a logout), run while it is ready.
    watch_tokens: Callable[[], Coroutine[Any, Any, None]] | None = None

    async def on_response(self, response: httpx2.Response) -> None:
        self.last_status = response.status_code
        if response.status_code >= 400:
            self.statuses.append(response.status_code)


def child_environment(config: ServerConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a stdio child: the inherited allow-list plus the configured ``env``,
    with the PATH of :mod:`mcp_hub.config.commands`."""
    return config.search_path.apply(prespawn.filtered_environment(config.env, base))


@asynccontextmanager
async def open_transport(
    name: str,
    config: ServerConfig,
    *,
    probe: TransportProbe,
    on_eof: Callable[[str], None],
    adopt_early: AdoptEarly | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Open the transport of server ``name``; yields the ``(read, write)`` stream pair.

    ``on_eof(reason)`` is called when the connection ends by itself (the child's
    stdout closed), so the owner can tear the session down without waiting for a
    failed request.
    A server whose config names an unset variable fails at once, for good: it is parked
    with that reason while the others start.
    """
    if config.unset_variable is not None:
        raise ConnectFailure(config.unset_variable, permanent=True)
    if config.transport == "stdio":
        async with _stdio(name, config, probe, on_eof, adopt_early) as streams:
            yield streams
        return
    auth = _oauth(name, config, probe, on_eof) if config.auth == "oauth" else None
    async with _http_streams(name, config, probe, auth) as (read, write):
        yield _AnswerMalformedResponses(name, read), write


def _oauth(name: str, config: ServerConfig, probe: TransportProbe,
           on_eof: Callable[[str], None]) -> httpx2.Auth:
    """The OAuth client of server ``name``; a needed login ends the session at once."""

    def needs_login(reason: str) -> None:
        probe.needs_login = reason
        on_eof(f"needs login ({reason}): {login_hint(name)}")

    def logged_out() -> None:
        if config.oauth.grant != "authorization_code":  # no person needed to get new ones
            on_eof("the stored OAuth tokens were deleted; connecting again with new ones")
        else:
            needs_login("the stored tokens were deleted (mcp-hub logout)")

    auth = hub_auth(name, config, needs_login)
    probe.watch_tokens = functools.partial(watch_logout, auth.hub_store, logged_out)
    return auth
#: Every call in flight holds a connection for its response stream, and answering the
#: upstream's question (sampling, elicitation) needs one more: httpx's default pool of
#: 100 deadlocks at 100 waiting calls.
UPSTREAM_HTTP_LIMITS = httpx2.Limits(max_connections=1024, max_keepalive_connections=100)


@asynccontextmanager
async def _http_streams(name: str, config: ServerConfig, probe: TransportProbe,
                        auth: httpx2.Auth | None = None) -> AsyncIterator[tuple[Any, Any]]:
    assert config.url is not None
    async with AsyncExitStack() as stack:
        timeout = httpx2.Timeout(config.connect_timeout, read=max(config.max_call_seconds, 300.0))
        hooks: dict[str, list[Any]] = {"response": [probe.on_response],
                                       "request": [inject_trace_headers]}
        if config.transport == "http":
            # An answer written as newline-delimited JSON is read line by line.
            hooks["response"].append(ndjson_hook(name, config.max_message_bytes))
            polls = StreamPolls()  # calls whose stream the upstream closes mid-call
            hooks["request"].append(polls.on_request)
            client = httpx2.AsyncClient(
                headers=dict(config.headers) or None, timeout=timeout, event_hooks=hooks,
                auth=auth,
                limits=UPSTREAM_HTTP_LIMITS,
            )
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
            stack.enter_context(watch(streams[1], polls))
        else:

            def factory(
                headers: dict[str, str] | None = None,
                timeout: httpx2.Timeout | None = None,
                auth: httpx2.Auth | None = None,
            ) -> httpx2.AsyncClient:
                kwargs: dict[str, Any] = {"event_hooks": hooks}
                if headers is not None:
                    kwargs["headers"] = headers
                if timeout is not None:
                    kwargs["timeout"] = timeout
                if auth is not None:
                    kwargs["auth"] = auth
                return httpx2.AsyncClient(**kwargs)

            streams = await stack.enter_async_context(
                sse_client(
                    config.url,
                    headers=dict(config.headers) or None,
                    timeout=config.connect_timeout,
                    sse_read_timeout=max(config.max_call_seconds, 300.0),
                    httpx_client_factory=factory,
                    auth=auth,
                )
            )
        yield streams


# ── stdio ─────────────────────────────────────────────────────────────────────


def _resolve_command(config: ServerConfig) -> str:
    assert config.command is not None
    if config.cwd is not None and not os.path.isdir(config.cwd):
        raise ConnectFailure(f"cwd does not exist: {config.cwd}", permanent=True)
    found = commands.find_command(config.command, child_environment(config).get("PATH"),
                                  config.cwd)
    if found is None:
        raise ConnectFailure(commands.not_found_message(config.command), permanent=True)
    return found


@asynccontextmanager
async def _stdio(
    name: str, config: ServerConfig, probe: TransportProbe, on_eof: Callable[[str], None],
    adopt_early: AdoptEarly | None,
) -> AsyncIterator[tuple[Any, Any]]:
    command = _resolve_command(config)
    argv, env = [command, *config.args], child_environment(config)
    process: Any = None
    if adopt_early is not None:
        process = await adopt_early(name, argv, env, config.cwd)
    if process is not None:
        logger.debug("[%s] using the process started early (pid %d)", name, process.pid,
                     extra={"server": name})
    try:
        if process is None and pdeathsig.available():
            # Started with a parent-death signal: the child dies even with a kill -9'd hub.
            process = await prespawn.spawn(argv, env, config.cwd)
        elif process is None:
            process = await anyio.open_process(
                argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, cwd=config.cwd, env=env,
                start_new_session=True,
            )
    except FileNotFoundError as exc:
        raise ConnectFailure(f"command not found: {exc.filename or command}",
                             permanent=True) from None
    except PermissionError:
        raise ConnectFailure(f"command is not executable: {command}", permanent=True) from None
    except OSError as exc:
        raise ConnectFailure(f"cannot start {command}: {exc.strerror or exc}") from None

    probe.pid = process.pid
    # No await between the spawn and the task group, so a cancellation cannot leak the child.
    # Stdout is read and parsed in the session's receiving task and requests go into
    # stdin in the caller's task: no reader or writer task, no hand-over between tasks.
    assert process.stdout is not None
    read = StdoutReadStream(process.stdout, _stdout_parser(name, config.max_message_bytes),
                            _eof_reporter(process, on_eof))
    write = StdinWriteStream(process.stdin, read.end)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_stderr, name, process, probe)
            try:
                yield read, write
            finally:
                with anyio.CancelScope(shield=True):
                    write.close()
                    read.close()
                    await _stop_process(process)
                tg.cancel_scope.cancel()
    finally:
        write.close()
        read.close()


class _Oversized:
    """A stdout line longer than the limit: its size and its two ends, nothing else."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, size: int, head: bytes, tail: bytes) -> None:
        self.size, self.head, self.tail = size, head, tail


_EDGE = 4096
_ID_LAST = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')
_ID_FIRST = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


class _Lines:
    """Split stdout into lines in time linear in their size, capping each at ``limit``.

    Only new bytes are searched for a newline, the pieces of a long line are joined
    once, and a line over the limit is not kept: only its ends, to find its id.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[bytes] = []
        self.size = 0
        self.head = b""
        self.tail = b""
        self.over = False

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        out: list[bytes | _Oversized] = []
        start = 0
        while (nl := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:nl])
            out.append(self._end())
            start = nl + 1
        if start < len(chunk):
            self._add(chunk[start:] if start else chunk)
        return out

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self.size += len(piece)
        if self.over:
            self.tail = (self.tail + piece)[-_EDGE:]
            return
        self.parts.append(piece)
        if self.size > self.limit:
            joined = b"".join(self.parts)
            self.parts = []
            self.head, self.tail, self.over = joined[:_EDGE], joined[-_EDGE:], True

    def _end(self) -> bytes | _Oversized:
        item: bytes | _Oversized
        if self.over:
            item = _Oversized(self.size, self.head, self.tail)
        elif len(self.parts) == 1:
            item = self.parts[0]
        else:
            item = b"".join(self.parts)
        self.parts, self.size, self.head, self.tail, self.over = [], 0, b"", b"", False
        return item


def _oversized_reply(item: _Oversized, limit: int) -> SessionMessage | None:
    """An error response for the request an oversized line answered, if its id is findable."""
    match = _ID_LAST.search(item.tail) or _ID_FIRST.search(item.head)
    if match is None:
        return None
    raw = match.group(1)
    request_id: int | str = int(raw) if raw[:1] != b'"' else json.loads(raw)
    message = (f"the server's answer of {item.size / 1048576:.1f} MB exceeds "
               f"max_message_bytes ({limit / 1048576:g} MB); it was dropped")
    return SessionMessage(types.JSONRPCError(
        jsonrpc="2.0", id=request_id,
        error=types.ErrorData(code=types.INTERNAL_ERROR, message=message)))


def _invalid_response(value: Any) -> tuple[int | str, str] | None:
    """For a JSON object that answers a request (it has an id, no method) but is not a
    valid JSON-RPC response: its id and what is wrong with it. None for anything else."""
    if not isinstance(value, dict) or "method" in value:
        return None
    request_id = value.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    has_result, has_error = "result" in value, "error" in value
    if has_result and has_error:
        why = "it has both a result and an error"
    elif has_result:
        result = value["result"]
        why = ("the result is not an object" if not isinstance(result, dict)
               else "the result is not valid")
    elif has_error:
        why = "the error is not a JSON-RPC error object (code, message)"
    else:
        why = "it has neither a result nor an error"
    if value.get("jsonrpc") != "2.0":
        why += "; jsonrpc is not \"2.0\""
    return request_id, why


def _error_reply(request_id: int | str, why: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(
        jsonrpc="2.0", id=request_id,
        error=types.ErrorData(code=types.INTERNAL_ERROR, message=f"{INVALID_RESPONSE}: {why}")))


def _invalid_in(exc: ValidationError) -> tuple[int | str, str] | None:
    """:func:`_invalid_response` of the message a validation error was about."""
    for error in exc.errors(include_url=False):
        found = _invalid_response(error.get("input"))
        if found is not None:
            return found
    return None


class _AnswerMalformedResponses:
    """The read stream of an HTTP or SSE transport, with every malformed response to a
    request replaced by an error response for that request, so the call fails at once
    instead of timing out. Items pass through in the receiving task (no extra hop),
    and the sender's context (``last_context``) is kept for the session's routing."""

    def __init__(self, name: str, source: Any) -> None:
        self._name = name
        self._source = source
        self.last_context: contextvars.Context | None = None

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._source.receive()
        self.last_context = getattr(self._source, "last_context", None)
        if isinstance(item, ValidationError):
            found = _invalid_in(item)
            if found is not None:
                logger.warning("[%s] upstream sent an invalid response to request %r: %s",
                               self._name, found[0], found[1], extra={"server": self._name})
                return _error_reply(*found)
        return item

    def __aiter__(self) -> _AnswerMalformedResponses:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._source.close()

    async def aclose(self) -> None:
        await self._source.aclose()

    async def __aenter__(self) -> _AnswerMalformedResponses:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _stdout_parser(name: str, limit: int) -> Callable[[bytes], list[SessionMessage]]:
    """What a stdio child's stdout chunks hold: its messages, in order (see the module)."""
    adapter = types.jsonrpc_message_adapter
    lines = _Lines(limit)
    tag = {"server": name}

    def parse(chunk: bytes) -> list[SessionMessage]:
        items: list[SessionMessage] = []
        for line in lines.feed(chunk):
            reply: SessionMessage | None
            if isinstance(line, _Oversized):
                logger.warning("[%s] upstream sent a %d-byte message, over "
                               "max_message_bytes (%d); dropped", name, line.size, limit,
                               extra=tag)
                reply = _oversized_reply(line, limit)
            elif not line.strip():
                continue
            else:
                try:
                    reply = plain_response(line) or SessionMessage(
                        adapter.validate_json(line, by_name=False))
                except ValueError:
                    reply = _stdout_reply(name, line)
            if reply is not None:
                items.append(reply)
        return items

    return parse


def _eof_reporter(process: anyio.abc.Process, on_eof: Callable[[str], None]) -> Callable[[], None]:
    def report() -> None:
        code = process.returncode
        on_eof("the server process closed its stdout" if code is None
               else f"the server process exited with code {code}")
    return report


def _stdout_reply(name: str, line: bytes) -> SessionMessage | None:
    """A line of stdout that is not JSON-RPC: logged once; an error response for the
    request when it is a malformed answer to one (so that call fails at once)."""
    try:
        found = _invalid_response(json.loads(line))
    except ValueError:
        found = None
    if found is None:
        logger.warning("[%s] upstream wrote a non-JSON-RPC line to stdout: %r", name,
                       redact(line[:200].decode("utf-8", "replace")), extra={"server": name})
        return None
    logger.warning("[%s] upstream sent an invalid response to request %r: %s", name,
                   found[0], found[1], extra={"server": name})
    return _error_reply(*found)


async def _read_stderr(name: str, process: anyio.abc.Process, probe: TransportProbe) -> None:
    assert process.stderr is not None
    pending = b""
    with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
        async for chunk in process.stderr:
            if b"\n" not in chunk:
                # Keep at most one log line's worth of an unterminated line.
                pending = (pending + chunk)[:_MAX_STDERR_LINE]
                continue
            *lines, rest = chunk.split(b"\n")
            lines[0] = (pending + lines[0])[:_MAX_STDERR_LINE]
            pending = rest[:_MAX_STDERR_LINE]
            for line in lines:
                _log_stderr(name, line, probe)
    if pending:
        _log_stderr(name, pending, probe)


def _log_stderr(name: str, line: bytes, probe: TransportProbe) -> None:
    """One line of the child's stderr into the hub's log: colour codes and every other
    control or invisible character removed (a log line must not rewrite the terminal
    or forge another line), secrets redacted."""
    text = line.decode("utf-8", "replace")
    text = clean_description(_ANSI_ESCAPE.sub("", text)).replace("\n", " ").strip()
    if text:
        text = redact(text[:_MAX_STDERR_LINE])
        probe.stderr_tail.append(text)
        stderr_logger.info("[%s] %s", name, text, extra={"server": name})


async def _stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, give the child a grace period, then terminate its whole process group."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    await _wait_exit(process, _EXIT_GRACE_SECONDS)
    # Even when the leader exited, members of its group (npx → node) may live on.
    await _terminate_group(process)
    await _wait_exit(process, _TERM_GRACE_SECONDS)
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.aclose()
    transport = process_transport(process)
    close = getattr(transport, "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()
    await anyio.lowlevel.checkpoint()


async def _wait_exit(process: anyio.abc.Process, seconds: float) -> None:
    """Poll ``returncode``: ``process.wait()`` also waits for pipe EOF, which a grandchild
    holding the pipe would delay indefinitely."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no exit event to wait on
            await anyio.sleep(_POLL_SECONDS)


async def _terminate_group(process: anyio.abc.Process) -> None:
    if sys.platform == "win32":  # pragma: no cover
        with suppress(ProcessLookupError, OSError):
            process.kill()
        return
    pgid = process.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    with anyio.move_on_after(_TERM_GRACE_SECONDS):
        while _group_alive(pgid):
            _ = process.returncode
            await anyio.sleep(_POLL_SECONDS)
        return
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
