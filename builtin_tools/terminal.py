"""``terminal``: run one shell command on the hub's machine, bounded.

Off unless ``[builtins.terminal] enabled = true``, and refused (hidden and the
handler says no) while the hub listens on a non-loopback address without auth:
a shell must never be one unauthenticated request away.

Each call runs ``bash -c COMMAND`` (``sh`` where bash is missing) with stdin
closed, stdout and stderr merged, in its own session and process group. The
working directory is ``cwd`` from the config (relative to ``servers.toml``),
else the first file root, else the hub's own. When the timeout (the config's
``timeout``, default 30 s, which a call may only shorten) expires, or the call is
cancelled, the whole process group gets SIGKILL — children of children too.
Processes still running in the group when the command itself exits are killed
as well, so a stray background job can neither hold the output open nor
outlive the call (a process that starts its own session escapes this).
Output keeps its first and last parts within ``max_output_chars`` with a marker
in between. Commands matching a ``blocklist`` regex are refused.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections import deque
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream

from mcp_hub.pipeline.runtime import get_config, is_exposed_without_auth
from mcp_hub.registry.tool_registry import registry, tool_error

__all__ = ["TERMINAL_SCHEMA", "OutputCapture", "check_terminal_requirements", "terminal_tool"]

MAX_COMMAND_CHARS = 20_000
#: After the command ends, how long to wait for its output pipe to close.
DRAIN_SECONDS = 2.0
NOT_ENABLED = "The terminal tool is disabled; set [builtins.terminal] enabled = true to use it."
EXPOSED = (
    "The terminal tool is refused: the hub is listening on a non-loopback address "
    "without auth tokens."
)
_EXTRA_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "TERM": "dumb"}


class OutputCapture:
    """Keeps the first and last ``cap`` characters of a byte stream, decoded as UTF-8."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.total_chars = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._head: list[str] = []
        self._head_len = 0
        self._tail: deque[str] = deque()
        self._tail_len = 0

    def feed(self, data: bytes, *, final: bool = False) -> None:
        text = self._decoder.decode(data, final)
        if not text:
            return
        self.total_chars += len(text)
        room = self.cap - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if text:
            self._tail.append(text)
            self._tail_len += len(text)
            while self._tail and self._tail_len - len(self._tail[0]) >= self.cap:
                self._tail_len -= len(self._tail.popleft())

    @property
    def truncated(self) -> bool:
        return self.total_chars > self.cap

    def text(self) -> str:
        """The output, or its head and tail around a marker when over the cap."""
        head = "".join(self._head)
        if not self.truncated:
            return head
        keep_head = self.cap // 2
        keep_tail = self.cap - keep_head
        tail = (head + "".join(self._tail))[-keep_tail:]
        omitted = self.total_chars - keep_head - keep_tail
        return (f"{head[:keep_head]}\n\n[... output truncated: {omitted} characters omitted "
                f"...]\n\n{tail}")


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _working_directory() -> Path:
    config = get_config()
    base = config.source.parent if config.source is not None else Path.cwd()
    raw = config.builtins.terminal.cwd
    if raw:
        path = Path(os.path.expanduser(raw))
        return path if path.is_absolute() else base / path
    if config.builtins.file.roots:
        root = Path(os.path.expanduser(config.builtins.file.roots[0]))
        return root if root.is_absolute() else base / root
    return Path.cwd()


def _blocked_by(command: str, blocklist: list[str]) -> str | None:
    for pattern in blocklist:
        if re.search(pattern, command):
            return pattern
    return None


async def _pump(stream: ByteReceiveStream, capture: OutputCapture, done: anyio.Event) -> None:
    try:
        async for chunk in stream:
            capture.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        capture.feed(b"", final=True)
        done.set()


async def run_command(command: str, cwd: Path, time_limit: float,
                      max_output_chars: int) -> dict[str, Any]:
    """Run ``command`` in its own process group; kill the group on time-out or exit.

    The time limit is a parameter rather than the caller's cancel scope because
    running out of time is a result here (``timed_out``), not a cancellation.
    """
    shell = shutil.which("bash") or "/bin/sh"
    env = {**os.environ, **_EXTRA_ENV}
    capture = OutputCapture(max_output_chars)
    started = time.monotonic()
    # Shielded: the command may already run (and start children) before open_process
    # returns; a cancellation landing there would lose the group this function must kill.
    with anyio.CancelScope(shield=True):
        proc = await anyio.open_process(
            [shell, "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
    # start_new_session makes the shell a group leader: its pid is the group id.
    pgid = proc.pid
    try:
        assert proc.stdout is not None
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, proc.stdout, capture, done)
            with anyio.move_on_after(time_limit) as scope:
                await proc.wait()
            timed_out = scope.cancelled_caught
            _kill_group(pgid)
            with anyio.move_on_after(DRAIN_SECONDS):
                await done.wait()
            tg.cancel_scope.cancel()
        returncode = await proc.wait()
    finally:
        with anyio.CancelScope(shield=True):
            _kill_group(pgid)
            await proc.aclose()
    result: dict[str, Any] = {
        "exit_code": returncode,
        "timed_out": timed_out,
        "output": capture.text(),
        "truncated": capture.truncated,
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
    if timed_out:
        result["note"] = (f"Timed out after {time_limit:g} s; the command and every process it "
                          "started were killed.")
    elif returncode < 0:
        result["note"] = f"Killed by signal {signal.Signals(-returncode).name}."
    return result


# ── 1. handler ──────────────────────────────────────────────────────────────────


async def terminal_tool(args: dict[str, Any], **_context: Any) -> Any:
    """Run a shell command and return its exit code and (capped) output."""
    settings = get_config().builtins.terminal
    if not settings.enabled:
        return tool_error(NOT_ENABLED)
    if is_exposed_without_auth():
        return tool_error(EXPOSED)
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return tool_error("'command' must be a non-empty string.")
    if len(command) > MAX_COMMAND_CHARS:
        return tool_error(f"'command' must be at most {MAX_COMMAND_CHARS} characters.")
    if "\x00" in command:
        return tool_error("'command' must not contain NUL characters.")
    timeout = settings.timeout
    requested = args.get("timeout")
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int | float) or (
            requested <= 0
        ):
            return tool_error("'timeout' must be a positive number of seconds.")
        timeout = min(float(requested), settings.timeout)
    pattern = _blocked_by(command, settings.blocklist)
    if pattern is not None:
        return tool_error("Command refused: it matches the terminal blocklist.", pattern=pattern)
    cwd = _working_directory()
    if not cwd.is_dir():
        return tool_error(f"The terminal working directory does not exist: {cwd}")
    try:
        return await run_command(command, cwd, timeout, settings.max_output_chars)
    except OSError as exc:
        return tool_error(f"Cannot start the command: {exc.strerror or exc}")


# ── 2. check_fn ─────────────────────────────────────────────────────────────────


def check_terminal_requirements() -> bool:
    """Listed only when enabled and not exposed on a non-loopback address without auth."""
    return get_config().builtins.terminal.enabled and not is_exposed_without_auth()


# ── 3. schema ───────────────────────────────────────────────────────────────────

TERMINAL_SCHEMA: dict[str, Any] = {
    "name": "terminal",
    "description": (
        "Run a shell command (bash -c) on the machine running the hub and return its exit "
        "code and combined stdout/stderr. Non-interactive: stdin is closed. Runs in the "
        "hub's configured working directory with a timeout (default 30 s; `timeout` may only "
        "shorten it), after which the command and all processes it started are killed; "
        "background processes are killed when the command ends. Output over the cap "
        "(default 10,000 characters) keeps its beginning and end. Some destructive commands "
        "are refused by a blocklist."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1, "maxLength": MAX_COMMAND_CHARS,
                        "pattern": r"\S", "description": "The shell command line to run."},
            "timeout": {"type": "number", "exclusiveMinimum": 0,
                        "description": "Seconds before the command is killed (at most the "
                                       "configured timeout)."},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    "annotations": {"title": "Terminal", "readOnlyHint": False, "destructiveHint": True,
                    "idempotentHint": False, "openWorldHint": True},
}

# ── 4. registration ─────────────────────────────────────────────────────────────

registry.register(
    name="terminal",
    toolset="terminal",
    schema=TERMINAL_SCHEMA,
    handler=terminal_tool,
    check_fn=check_terminal_requirements,
    is_async=True,
    emoji="💻",
)
