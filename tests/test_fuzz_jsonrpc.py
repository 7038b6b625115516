"""Property-based fuzzing of the hub's JSON-RPC front doors (stdio and Streamable HTTP).

Hypothesis generates valid-ish and hostile messages — wrong types, huge ids,
missing fields, unknown methods, batches, non-JSON — and sends each to a real hub
process. The properties: every request (an object with ``jsonrpc: "2.0"``, a
string ``method`` and a string or integer ``id``) gets exactly one JSON-RPC
response carrying its id; nothing else gets a response other than an error
with a null id; every line or body the hub writes is valid JSON-RPC; and the
hub never crashes (it still answers ``ping`` after every example).

Tool calls are drawn from fast tools only (no ``slow``/``crash``/``sample``/
``elicit``), so a response never lags behind the ``ping`` that follows.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hubtest import PY, ROOT, echo_server_toml, hub_env, write_config

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

# ---------------------------------------------------------------------------- strategies

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
METHODS = ["initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get",
           "resources/list", "resources/read", "resources/templates/list", "resources/subscribe",
           "resources/unsubscribe", "completion/complete", "logging/setLevel",
           "notifications/initialized", "notifications/cancelled", "notifications/progress",
           "notifications/roots/list_changed", "subscriptions/listen"]
FAST_TOOLS = ["echo_echo", "echo_add", "echo_fail", "echo_big", "echo_log", "echo_env",
              "hub_status", "nope", "tool_search", ""]
methods = st.one_of(st.sampled_from(METHODS), st.text(max_size=30))
ids = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=30))
hostile_ids = st.one_of(st.integers(-(2**200), 2**200), st.floats(allow_nan=False),
                        st.booleans(), st.none(), st.lists(st.integers(), max_size=2),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
tool_call_params = st.fixed_dictionaries(
    {"name": st.one_of(st.sampled_from(FAST_TOOLS), st.text(max_size=20))},
    optional={"arguments": st.one_of(
        st.fixed_dictionaries({}, optional={"text": json_values, "a": json_values,
                                            "b": json_values, "size": st.integers(-5, 2000),
                                            "message": json_values, "name": json_values}),
        json_values),
        "_meta": st.one_of(json_values, st.fixed_dictionaries({"progressToken": ids}))})
params = st.one_of(st.none(), json_values, tool_call_params,
                   st.dictionaries(st.sampled_from(["uri", "name", "cursor", "level", "ref",
                                                    "argument", "requestId", "arguments"]),
                                   json_values, max_size=3))


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed request envelope with arbitrary (possibly invalid) params."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids), "method": draw(methods)}
    p = draw(params)
    if p is not None:
        message["params"] = p
    return message


@st.composite
def hostile_objects(draw: st.DrawFn) -> dict[str, Any]:
    """Objects with a random subset of the envelope's fields, any of them of a wrong type."""
    message: dict[str, Any] = {}
    if draw(st.booleans()):
        message["jsonrpc"] = draw(st.one_of(st.just("2.0"), json_scalars))
    if draw(st.booleans()):
        message["id"] = draw(st.one_of(ids, hostile_ids))
    if draw(st.booleans()):
        message["method"] = draw(st.one_of(methods, json_scalars))
    if draw(st.booleans()):
        message["params"] = draw(params)
    for key in draw(st.lists(st.sampled_from(["result", "error", "extra"]), max_size=2)):
        message[key] = draw(json_values)
    return message


messages = st.one_of(
    requests(),
    hostile_objects(),
    st.lists(st.one_of(requests(), hostile_objects()), min_size=0, max_size=3),  # batches
    json_values,
)
raw_lines = st.one_of(
    messages.map(lambda m: json.dumps(m).encode()),
    st.binary(max_size=200).filter(lambda b: b"\n" not in b and b"\r" not in b),
    st.text(max_size=100).filter(lambda t: "\n" not in t and "\r" not in t)
    .map(lambda t: t.encode()),
)


def has_request_id(message: Any) -> bool:
    return (isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            and isinstance(message.get("method"), str)
            and isinstance(message.get("id"), (int, str)) and not isinstance(message["id"], bool)
            and (not isinstance(message["id"], int) or abs(message["id"]) <= 2**53))


def is_request(message: Any) -> bool:
    """A request the hub must answer with its id. Params that are not an object are
    left out: the SDK transports answer those with a null id (HTTP) or not at all
    (stdio) — see the xfail tests below."""
    return has_request_id(message) and isinstance(message.get("params", {}), dict)


def parse(line: bytes) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def expected_ids(line: bytes) -> list[Any]:
    message = parse(line)
    return [message["id"]] if is_request(message) else []


def allowed_ids(line: bytes) -> list[Any]:
    """Ids a response may carry: the request's own, even when it is not a proper request."""
    message = parse(line)
    return [message["id"]] if has_request_id(message) else []


def check_envelope(message: Any) -> None:
    """A message the hub wrote: a valid JSON-RPC response, request or notification."""
    assert isinstance(message, dict), message
    assert message.get("jsonrpc") == "2.0", message
    if "method" in message:
        assert isinstance(message["method"], str)
        return
    assert "id" in message, message
    assert ("result" in message) != ("error" in message), message
    if "error" in message:
        error = message["error"]
        assert isinstance(error, dict) and isinstance(error.get("code"), int), message
        assert isinstance(error.get("message"), str), message


# ---------------------------------------------------------------------------- stdio


class StdioHub:
    """The hub as a subprocess speaking newline-delimited JSON-RPC on its pipes."""

    def __init__(self, config: Path) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "mcp_hub", "serve", "--config", str(config)], cwd=str(ROOT),
            env=hub_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._ids = itertools.count()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        assert line, f"the hub closed its stdout (exit code {self.proc.poll()})"
        message = json.loads(line)
        check_envelope(message)
        return dict(message)

    def ping(self, wanted: list[Any] | None = None, timeout: float = 30) -> list[dict[str, Any]]:
        """Send a ping; everything received until its answer and the responses with the
        ``wanted`` ids are in (requests are handled concurrently: any order)."""
        token = f"ping-{next(self._ids)}"
        self.send(json.dumps({"jsonrpc": "2.0", "id": token, "method": "ping"}).encode())
        received: list[dict[str, Any]] = []
        pinged = False
        missing = [repr(w) for w in wanted or []]
        while not pinged or missing:
            message = self.receive(timeout)
            if message.get("id") == token and "method" not in message:
                assert message.get("result") == {}
                pinged = True
                continue
            received.append(message)
            if "method" in message:
                answer_server_request(self, message)
            elif repr(message.get("id")) in missing:
                missing.remove(repr(message.get("id")))
        return received

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def stdio_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioHub]:
    config = write_config(tmp_path_factory.mktemp("fuzz-stdio"), echo_server_toml())
    hub = StdioHub(config)
    hub.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fuzz", "version": "0"}}}).encode())
    assert hub.receive()["id"] == "init"
    hub.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    hub.ping()
    yield hub
    alive = hub.proc.poll() is None
    hub.close()
    assert alive, "the hub exited during the fuzzing"


def answer_server_request(hub: StdioHub, message: dict[str, Any]) -> None:
    if "id" in message:  # a request to the client (sampling, roots): refuse it
        hub.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {
            "code": -32601, "message": "not supported"}}).encode())


@SETTINGS
@given(line=raw_lines)
def test_every_stdio_request_gets_one_response_and_the_hub_survives(
        stdio_hub: StdioHub, line: bytes) -> None:
    stdio_hub.send(line)
    wanted = expected_ids(line)
    received = stdio_hub.ping(wanted)
    responses = [m for m in received if "method" not in m]
    got = [m["id"] for m in responses]
    for want in wanted:
        assert got.count(want) == 1, (line, received)
    for m in responses:
        assert m["id"] in allowed_ids(line) or (m["id"] is None and "error" in m), (line, received)


# ---------------------------------------------------------------------------- HTTP


class HttpFront:
    """A hub serving HTTP, and one initialised session on it (sync client)."""

    def __init__(self, tmp: Path) -> None:
        config = write_config(tmp, echo_server_toml())
        port_file = tmp / "port"
        self.proc = subprocess.Popen(
            [PY, "-m", "mcp_hub", "serve", "--transport", "http", "--port", "0", "--config",
             str(config), "--port-file", str(port_file)], cwd=str(ROOT), env=hub_env(),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = httpx2.Client(timeout=30)
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text()):  # bounded poll of a process
            assert self.proc.poll() is None and time.monotonic() < deadline, "hub did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{int(port_file.read_text())}"
        while self.client.get(f"{base}/readyz").status_code != 200:
            assert time.monotonic() < deadline, "hub not ready"
            time.sleep(0.05)
        self.url = f"{base}/mcp"
        self.headers = {"Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json"}
        init = self.post(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"}}}).encode())
        self.headers["Mcp-Session-Id"] = init.headers["mcp-session-id"]
        self.post(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

    def post(self, body: bytes) -> httpx2.Response:
        return self.client.post(self.url, content=body, headers=self.headers)

    def close(self) -> None:
        self.client.close()
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def messages_in(response: httpx2.Response) -> list[Any]:
    """The JSON-RPC messages of a plain JSON or an SSE response body."""
    ctype = response.headers.get("content-type", "")
    if not response.content:
        return []
    if ctype.startswith("text/event-stream"):
        out = []
        # SSE ends lines with CR, LF or CRLF only; str.splitlines would also split on
        # U+0085 and friends, which may legitimately appear inside a JSON string.
        for line in response.text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            if line.startswith("data:") and line[5:].strip():
                out.append(json.loads(line[5:]))
        return out
    if ctype.startswith("application/json"):
        body = response.json()
        return body if isinstance(body, list) else [body]
    return []


@pytest.fixture(scope="module")
def http_front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpFront]:
    front = HttpFront(tmp_path_factory.mktemp("fuzz-http"))
    yield front
    alive = front.proc.poll() is None
    front.close()
    assert alive, "the hub exited during the fuzzing"


@SETTINGS
@given(line=raw_lines)
def test_every_http_request_gets_one_response_and_the_hub_survives(
        http_front: HttpFront, line: bytes) -> None:
    response = http_front.post(line)
    assert response.status_code < 500, (line, response.status_code, response.text)
    received = messages_in(response)
    for message in received:
        check_envelope(message)
    wanted = expected_ids(line)
    responses = [m for m in received if "method" not in m]
    for want in wanted:
        assert [m["id"] for m in responses].count(want) == 1, (line, response.text)
    for m in responses:
        assert m["id"] in allowed_ids(line) or (m["id"] is None and "error" in m), (
            line, response.text)
    if not wanted:
        assert response.status_code in (200, 202, 400, 404, 405, 406, 413, 415, 422), (
            line, response.status_code)
    ping = http_front.post(b'{"jsonrpc": "2.0", "id": "alive", "method": "ping"}')
    assert [m.get("result") for m in messages_in(ping) if m.get("id") == "alive"] == [{}]


# ---------------------------------------------------------------------------- known gaps

WRONG_PARAMS = b'{"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": []}'


def test_a_stdio_request_with_params_of_the_wrong_type_gets_an_error_with_its_id(
        stdio_hub: StdioHub) -> None:
    stdio_hub.send(WRONG_PARAMS)
    received = stdio_hub.ping([41], timeout=10)
    assert [m["id"] for m in received if "method" not in m] == [41]


def test_an_http_request_with_params_of_the_wrong_type_gets_an_error_with_its_id(
        http_front: HttpFront) -> None:
    response = http_front.post(WRONG_PARAMS)
    assert [m.get("id") for m in messages_in(response)] == [41]
