"""Edge cases of the stdio fast path, the hub's stdio transport, early-started upstreams
and hot reload: hostile input, cancellation, shutdown with calls in flight, fd state,
config escapes and invalid reloads. Each compares with what the SDK path does."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.upstream.stdio import prespawn
from tests.hubtest import PY, ROOT, echo_server_toml, hub_env, write_config

pytestmark = pytest.mark.anyio

_FAST = "tools/call"
# The same request the fast path's byte pre-filter does not recognise: served by the SDK.
_SDK = "tools\\/call"


class _RawHub:
    """The hub as a stdio subprocess driven with raw JSON-RPC lines."""

    def __init__(self, config: Path) -> None:
        self.stderr_path = config.with_suffix(".stderr")
        self._err = self.stderr_path.open("wb")
        self.proc = subprocess.Popen(
            [PY, "-m", "mcp_hub", "serve", "--config", str(config)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
            cwd=str(ROOT), env=hub_env(), bufsize=0,
        )
        self.buf = b""

    def send(self, line: str | dict[str, Any]) -> None:
        text = line if isinstance(line, str) else json.dumps(line)
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")

    def recv(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def until_id(self, rid: Any, timeout: float = 15) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        seen: list[dict[str, Any]] = []
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            message = self.recv(left)
            if message is None:
                break
            seen.append(message)
            if message.get("id") == rid and "method" not in message:
                return message, seen
        return None, seen

    def drain(self, timeout: float) -> list[dict[str, Any]]:
        out = []
        while (message := self.recv(timeout)) is not None:
            out.append(message)
        return out

    def initialize(self, capabilities: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        assert self.until_id("init")[0] is not None
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        assert self.until_id("list", 30)[0] is not None

    def alive_after_ping(self) -> bool:
        try:
            self.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
        except BrokenPipeError:
            return False
        return self.until_id("ping", 5)[0] is not None

    def close(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@pytest.fixture
def raw_hub(tmp_path: Path) -> Any:
    hubs: list[_RawHub] = []

    def start() -> _RawHub:
        config = write_config(tmp_path, echo_server_toml("echo"), hub="watch_config = false\n")
        hub = _RawHub(config)
        hubs.append(hub)
        return hub

    yield start
    for hub in hubs:
        hub.close()


def _first_progress(hub: _RawHub, timeout: float = 30) -> dict[str, Any] | None:
    """The first progress notification (bounded by ``timeout``), other messages skipped."""
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        message = hub.recv(left)
        if message is None:
            return None
        if message.get("method") == "notifications/progress":
            return message
    return None


def _call(rid: Any, name: str, arguments: str = "{}", method: str = _FAST) -> str:
    return ('{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"method":"' + method
            + '","params":{"name":"' + name + '","arguments":' + arguments + '}}')


# ---------------------------------------------------------------------------- hub killers


def test_a_lone_surrogate_in_a_tool_name_is_answered_not_fatal(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize()
    hub.send(_call(9, "\\ud800"))
    answer, _ = hub.until_id(9, 10)
    assert answer is not None and "error" in answer
    assert hub.alive_after_ping()


def test_a_lone_surrogate_in_arguments_is_rejected_like_the_sdk_does(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize()
    hub.send(_call(1, "echo_echo", '{"text":"a\\udc80b"}'))
    answer, _ = hub.until_id(1, 15)
    assert answer is not None
    # The SDK path answers a JSON-RPC error; it never reaches (and never kills) the upstream.
    assert "error" in answer, answer


def test_a_cancel_with_an_object_request_id_is_ignored(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize()
    hub.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"x": 1}}})
    assert hub.alive_after_ping()


# ---------------------------------------------------------------------------- SDK parity


def test_no_response_after_a_cancel_that_names_the_id_as_a_string(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize()
    hub.send({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "echo_slow", "arguments": {"seconds": 1.5, "steps": 3},
        "_meta": {"progressToken": "p"}}})
    assert _first_progress(hub) is not None  # the call is running upstream
    hub.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "7"}})
    answer, _ = hub.until_id(7, 4)
    assert answer is None


def test_call_logs_without_set_level_match_the_sdk_path(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize()
    logs = {}
    for rid, method in ((1, _FAST), (2, _SDK)):
        hub.send(_call(rid, "echo_log", '{"message":"hi"}', method))
        answer, seen = hub.until_id(rid)
        assert answer is not None
        logs[method] = [m["method"] for m in seen if m.get("method") == "notifications/message"]
    assert logs[_FAST] == logs[_SDK] == ["notifications/message"]


def test_an_abandoned_sampling_request_is_cancelled_at_the_client(raw_hub: Any) -> None:
    hub = raw_hub()
    hub.initialize({"sampling": {}})
    hub.send(_call(1, "echo_sample", '{"prompt":"p"}'))
    request = None
    end = time.monotonic() + 15
    while request is None and time.monotonic() < end:
        message = hub.recv(end - time.monotonic())
        if message is not None and message.get("method") == "sampling/createMessage":
            request = message
    assert request is not None
    hub.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    later = hub.drain(2.0)
    assert any(m.get("method") == "notifications/cancelled"
               and m["params"]["requestId"] == request["id"] for m in later), later


def test_eof_with_a_call_in_flight_answers_connection_closed_promptly(raw_hub: Any) -> None:
    """The call would run for 600 s: an answer within the bound is the hub's, not the call's."""
    hub = raw_hub()
    hub.initialize()
    hub.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo_slow", "arguments": {"seconds": 600, "steps": 6000},
        "_meta": {"progressToken": "p"}}})
    assert _first_progress(hub) is not None  # the call is running upstream
    assert hub.proc.stdin is not None
    hub.proc.stdin.close()
    answer, _ = hub.until_id(1, 30)
    hub.proc.wait(30)
    assert answer is not None and answer.get("error", {}).get("code") == -32000


# ---------------------------------------------------------------------------- transport


def test_stdio_server_leaves_fd0_and_fd1_blocking() -> None:
    script = textwrap.dedent("""
        import os, sys, anyio
        from mcp_hub.downstream.stdio.transport import stdio_server
        r0, w0 = os.pipe(); r1, w1 = os.pipe()
        os.dup2(r0, 0); os.dup2(w1, 1); os.close(r0); os.close(w1)
        os.write(w0, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\\n'); os.close(w0)
        async def main():
            async with stdio_server() as (read, write):
                async for _ in read:
                    pass
                await write.aclose()
        anyio.run(main)
        print(os.get_blocking(0), os.get_blocking(1), file=sys.stderr)
    """)
    done = subprocess.run([PY, "-c", script], cwd=str(ROOT), env=hub_env(), capture_output=True,
                          timeout=60, check=True)
    assert done.stderr.decode().split()[-2:] == ["True", "True"]


# ---------------------------------------------------------------------------- prespawn


def test_prespawn_does_not_start_a_server_whose_args_use_dollar_escapes(tmp_path: Path) -> None:
    body = echo_server_toml("esc").replace(
        'args = ["-m", "tests.fixtures.echo_server"]',
        'args = ["-m", "tests.fixtures.echo_server", "--price=$$5"]')
    config = write_config(tmp_path, body)
    try:
        assert prespawn.start(config) == 0
    finally:
        prespawn.discard_all()


# ---------------------------------------------------------------------------- hot reload


async def _reload_after_writing(tmp_path: Path, content: bytes) -> tuple[bool | BaseException, Any, Any]:
    from mcp_hub.config.model import load_config
    from mcp_hub.hub.core import Hub

    path = tmp_path / "servers.toml"
    path.write_text("[hub]\nwatch_config = false\n")
    async with Hub(load_config(path), load_builtins=False, load_plugin_modules=False) as hub:
        old = hub.config
        path.write_bytes(content)
        outcome: bool | BaseException
        try:
            outcome = await hub.reload()
        except Exception as exc:  # what would kill watch_config and with it the hub
            outcome = exc
        return outcome, (hub.config is old), (hub.runtime.config is old)


async def test_reload_of_a_file_that_is_not_utf8_keeps_the_running_config(tmp_path: Path) -> None:
    outcome, same_hub_config, same_runtime = await _reload_after_writing(
        tmp_path, b'[hub]\nname = "caf\xe9"\n')
    assert outcome is False and same_hub_config and same_runtime


async def test_reload_with_a_reserved_toolset_name_keeps_the_running_config(tmp_path: Path) -> None:
    outcome, same_hub_config, same_runtime = await _reload_after_writing(
        tmp_path, b"[hub]\nwatch_config = false\n[toolsets.all]\ntools = ['x']\n")
    assert outcome is False and same_hub_config and same_runtime


def test_sdk_parity_sanity_the_sdk_path_is_really_taken(raw_hub: Any) -> None:
    """Guards the trick the parity tests use: an escaped method name bypasses the fast path."""
    hub = raw_hub()
    hub.initialize()
    hub.send(_call(5, "echo_echo", '{"text":"x"}', _SDK))
    answer, _ = hub.until_id(5)
    assert answer is not None and answer["result"]["content"][0]["text"] == "x"
