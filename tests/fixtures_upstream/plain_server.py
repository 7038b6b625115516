"""A stdio MCP server in plain Python (no SDK import: it starts in tens of milliseconds).

Tools:

- ``echo`` answers with its ``text`` argument;
- ``hang`` never answers; when the client sends ``notifications/cancelled`` for it,
  the line ``cancelled <id>`` is appended to the file named by ``PLAIN_MARKER``;
- ``crash`` makes the process exit at once (code 3) without answering;
- ``sleep`` answers ``slept`` after ``seconds`` (other requests are served meanwhile).

It also records, in the same file: ``called <tool>`` for every call received;
``roots <json>`` with the answer (or error) to each ``roots/list`` request it
sends the client (after ``notifications/initialized`` and after every
``notifications/roots/list_changed``, when ``PLAIN_ASK_ROOTS`` is set); and
``roots_changed`` for every ``notifications/roots/list_changed``. It writes its
pid to ``PLAIN_PID_FILE`` (one line per process) when set, so a test can check it is gone.
With ``STAY_AFTER_EOF`` set it does not exit when its input ends: only a signal ends it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from pathlib import Path

MARKER = Path(os.environ.get("PLAIN_MARKER", os.devnull))
TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "hang", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "crash", "inputSchema": {"type": "object", "properties": {}}},
    {"name": "sleep", "inputSchema": {"type": "object",
                                      "properties": {"seconds": {"type": "number"}}}},
]
#: Answers due later: (monotonic time, message).
_due: list[tuple[float, dict[str, object]]] = []


def record(line: str) -> None:
    with MARKER.open("a") as f:
        f.write(line + "\n")


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


_asked = [0]


def ask_roots() -> None:
    if os.environ.get("PLAIN_ASK_ROOTS"):
        _asked[0] += 1
        send({"jsonrpc": "2.0", "id": f"roots-{_asked[0]}", "method": "roots/list"})


def handle(message: dict[str, object]) -> None:
    method = message.get("method")
    params = message.get("params") or {}
    assert isinstance(params, dict)
    if method is None:
        if str(message.get("id")).startswith("roots-"):
            record("roots " + json.dumps(message.get("result", message.get("error"))))
        return
    if "id" not in message:
        if method == "notifications/cancelled":
            record(f"cancelled {params.get('requestId')}")
        elif method == "notifications/roots/list_changed":
            record("roots_changed")
            ask_roots()
        elif method == "notifications/initialized":
            ask_roots()
        return
    result: dict[str, object]
    if method == "initialize":
        result = {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "plain", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name = params.get("name")
        record(f"called {name}")
        if name == "hang":
            return
        if name == "crash":
            os._exit(3)
        args = params.get("arguments") or {}
        assert isinstance(args, dict)
        if name == "sleep":
            answer = {"jsonrpc": "2.0", "id": message["id"],
                      "result": {"content": [{"type": "text", "text": "slept"}]}}
            _due.append((time.monotonic() + float(args.get("seconds", 1)), answer))
            return
        result = {"content": [{"type": "text", "text": str(args.get("text", ""))}]}
    elif method == "ping":
        result = {}
    else:
        send({"jsonrpc": "2.0", "id": message["id"],
              "error": {"code": -32601, "message": f"Method not found: {method}"}})
        return
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})


def main() -> None:
    pid_file = os.environ.get("PLAIN_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as f:
            f.write(f"{os.getpid()}\n")
    pending = b""
    while True:
        timeout = max(0.0, min(t for t, _ in _due) - time.monotonic()) if _due else None
        readable, _, _ = select.select([0], [], [], timeout)
        if readable:
            chunk = os.read(0, 65536)
            if not chunk:
                if os.environ.get("STAY_AFTER_EOF"):
                    while True:
                        signal.pause()
                return
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    handle(json.loads(line))
        now = time.monotonic()
        for item in [d for d in _due if d[0] <= now]:
            _due.remove(item)
            send(item[1])


if __name__ == "__main__":
    main()
