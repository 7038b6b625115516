"""Start stdio upstreams before the hub has finished importing itself.

A stdio upstream is usually a Python or Node program that needs a second or
more to import its own SDK; the hub needs most of a second to import its own.
Run one after the other, the hub's first ``tools/list`` would wait for both.
So the CLI calls :func:`start` before it imports anything heavy (this module
uses the standard library only): it reads ``servers.toml`` with ``tomllib`` and
spawns every plain stdio server — ``command``/``args``/``env``/``cwd`` without
``${…}`` references, enabled, stdio — exactly as the upstream transport would.

The processes wait in a hand-off set until the first Hub opens and takes them
over (:func:`claim`) into its own :class:`EarlyStarts`; a second Hub in the same
process finds nothing to take. When the Hub's transport later connects a server
it calls :meth:`EarlyStarts.adopt` with the command line, environment and folder
it computed from the validated config; a pre-started process is used only if all
three match exactly, otherwise it is stopped and the transport spawns its own.
Anything not adopted is stopped when the Hub closes, and anything no Hub took
when the CLI exits (:func:`discard_all`). Nothing here changes what runs — only when.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp_hub.config import commands
from mcp_hub.config.path import find_config_path
from mcp_hub.plumbing import pdeathsig
from mcp_hub.plumbing.pipes import CoalescingWriter, open_read_pipe, open_write_pipe

__all__ = [
    "INHERITED_ENV_VARS",
    "AdoptEarly",
    "EarlyStarts",
    "claim",
    "discard_all",
    "filtered_environment",
    "find_config_path",
    "spawn",
    "start",
]

#: Variables a stdio child inherits from the hub; everything else must be set in ``env``
#: (docs/upstreams.md, "What a child inherits" lists them; a test reads that list).
#: The CA bundle variables are paths to certificates the machine trusts, never secrets:
#: without them ``uvx``/``pip``/``npx`` behind a TLS-inspecting proxy cannot fetch a
#: package. Proxies and package mirrors may carry credentials: ``env`` passes them.
INHERITED_ENV_VARS = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE",
    "TERM", "TMPDIR", "TEMP", "TMP", "TZ", "SYSTEMROOT", "APPDATA", "LOCALAPPDATA",
    "USERPROFILE", "PATHEXT", "COMSPEC",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
)

_READ_CHUNK = 65536

#: ``adopt(name, argv, env, cwd)``: a process started early for ``name``, or None.
AdoptEarly = Callable[[str, list[str], Mapping[str, str], "str | None"],
                      Awaitable["AdoptedProcess | None"]]


def filtered_environment(extra: Mapping[str, str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a stdio child: the inherited allow-list plus ``extra``."""
    source = os.environ if base is None else base
    env = {k: v for k in INHERITED_ENV_VARS if (v := source.get(k)) is not None
           and not v.startswith("()")}
    env.update(extra)
    return env


def _search_path(table: Any, config_path: Path) -> commands.SearchPath | None:
    """``[hub] path`` / ``hub_bin_on_path`` as the validated config will read them (None: unusual)."""
    table = {} if table is None else table
    if not isinstance(table, dict):
        return None
    entries, hub_bin = table.get("path", []), table.get("hub_bin_on_path", True)
    if not (isinstance(entries, list) and _plain(entries) and isinstance(hub_bin, bool)):
        return None
    return commands.search_path(entries, hub_bin, str(config_path.resolve().parent))


@dataclass
class _Started:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    popen: subprocess.Popen[bytes]


class EarlyStarts:
    """Processes started early, by server name; one set per Hub (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started: dict[str, _Started] = {}

    def started(self) -> dict[str, _Started]:
        """What waits to be adopted now (a copy)."""
        with self._lock:
            return dict(self._started)

    def _put(self, name: str, item: _Started) -> None:
        with self._lock:
            self._started[name] = item

    def take_over(self, other: EarlyStarts) -> None:
        """Move every process of ``other`` into this set."""
        with other._lock:
            moved, other._started = other._started, {}
        with self._lock:
            self._started.update(moved)

    def discard_all(self) -> None:
        """Stop every process nobody adopted (blocking: up to a few seconds each)."""
        with self._lock:
            left = list(self._started.values())
            self._started.clear()
        for item in left:
            _stop(item.popen)

    async def adopt(self, name: str, argv: list[str], env: Mapping[str, str],
                    cwd: str | None) -> AdoptedProcess | None:
        """The process for ``name`` if it was started exactly so, else None."""
        with self._lock:
            item = self._started.pop(name, None)
        if item is None:
            return None
        loop = asyncio.get_running_loop()
        if item.argv != argv or item.env != dict(env) or item.cwd != cwd or item.popen.poll() is not None:
            await loop.run_in_executor(None, _stop, item.popen)
            return None
        try:
            return await AdoptedProcess.wrap(item.popen)
        except (OSError, ValueError, RuntimeError):
            # _stop closes the pipes too, including one a half-done wrap connected.
            await loop.run_in_executor(None, _stop, item.popen)
            return None


#: What :func:`start` spawned before any Hub existed; the first Hub to open claims it.
_handoff = EarlyStarts()


def claim() -> EarlyStarts:
    """Take over every process started early and not yet claimed (the Hub calls this)."""
    owned = EarlyStarts()
    owned.take_over(_handoff)
    return owned


def discard_all() -> None:
    """Stop every early process no Hub claimed (the CLI calls this on exit)."""
    _handoff.discard_all()


def _plain(value: Any) -> bool:
    # Any "$" may be config syntax (${VAR}, $$): only literal values are started early.
    if isinstance(value, str):
        return "$" not in value
    if isinstance(value, list):
        return all(isinstance(v, str) and _plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and isinstance(v, str) and _plain(v) for k, v in value.items())
    return False


def start(config_path: Path | None) -> int:
    """Spawn the plain stdio servers of ``config_path``; return how many started."""
    if sys.platform == "win32" or config_path is None or not config_path.is_file():
        return 0
    try:
        data = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 0
    servers = data.get("servers")
    search = _search_path(data.get("hub"), config_path)
    if not isinstance(servers, dict) or search is None:
        return 0
    count = 0
    for name, spec in servers.items():
        if not isinstance(spec, dict) or spec.get("enabled", True) is not True:
            continue
        if "url" in spec or spec.get("transport", "stdio") != "stdio":
            continue
        command, args = spec.get("command"), spec.get("args", [])
        env_extra, cwd, own_path = spec.get("env", {}), spec.get("cwd"), spec.get("path", [])
        if not (isinstance(command, str) and _plain(command) and _plain(args) and _plain(env_extra)
                and isinstance(own_path, list) and _plain(own_path)):
            continue
        if cwd is not None and not _plain(cwd):
            continue
        command, args, cwd = commands.resolve_server_paths(
            command, args, cwd, str(config_path.resolve().parent))
        if command is None or (cwd is not None and not os.path.isdir(cwd)):
            continue
        server_search = search.prepended(own_path, str(config_path.resolve().parent))
        env = server_search.apply(filtered_environment(env_extra))
        executable = commands.find_command(command, env.get("PATH"), cwd)
        if executable is None:
            continue
        argv = [executable, *args]
        try:
            popen = _popen(argv, env, cwd)
        except OSError:
            continue
        _handoff._put(name, _Started(argv, env, cwd, popen))
        count += 1
    return count


def _popen(argv: list[str], env: Mapping[str, str], cwd: str | None) -> subprocess.Popen[bytes]:
    """Start one stdio child: its own process group, tied to the hub's life where the
    platform allows it (:mod:`mcp_hub.plumbing.pdeathsig`)."""
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        cwd=cwd, env=dict(env), start_new_session=True, bufsize=0,
        preexec_fn=pdeathsig.child_setup(),  # runs only prctl and getppid
    )


async def spawn(argv: list[str], env: Mapping[str, str], cwd: str | None) -> AdoptedProcess:
    """Start a stdio child now (from the event loop's thread), as :func:`start` does.

    A failure or cancellation after the fork kills the child's group at once.
    """
    popen = _popen(argv, env, cwd)
    try:
        return await AdoptedProcess.wrap(popen)
    except BaseException:
        _kill_now(popen)
        raise


def _kill_now(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()


def _stop(popen: subprocess.Popen[bytes]) -> None:
    for stream in (popen.stdin, popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(2)


# ---------------------------------------------------------------------------- the adapter


_WRITE_HIGH_WATER = 1 << 20


class _Receive:
    """A pipe read end as an async iterator of byte chunks (what the transport reads)."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._reader = reader
        self._transport = transport

    def __aiter__(self) -> _Receive:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._reader.read(_READ_CHUNK)
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def aclose(self) -> None:
        self._transport.close()


class _Send:
    """A pipe write end with ``send``/``aclose`` (one write per event-loop turn)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._out = CoalescingWriter(writer, _WRITE_HIGH_WATER)

    async def send(self, data: bytes) -> None:
        await self._out.send(data)

    async def aclose(self) -> None:
        self._out.close()


class AdoptedProcess:
    """A ``subprocess.Popen`` child with the attributes the stdio transport uses."""

    def __init__(self, popen: subprocess.Popen[bytes], stdin: _Send, stdout: _Receive,
                 stderr: _Receive) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    @classmethod
    async def wrap(cls, popen: subprocess.Popen[bytes]) -> AdoptedProcess:
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        stdout = _Receive(*await open_read_pipe(popen.stdout, limit=2**31))
        stderr = _Receive(*await open_read_pipe(popen.stderr, limit=2**31))
        return cls(popen, _Send(await open_write_pipe(popen.stdin)), stdout, stderr)

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()

    def terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.terminate()

    async def wait(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(None, self._popen.wait)

