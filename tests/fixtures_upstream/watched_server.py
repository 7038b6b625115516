"""A stdio MCP server with subscribable resources, in plain Python (no SDK import).

Resources ``watched://a`` and ``watched://b`` (text ``"<uri> v<N>"``), with
``resources/subscribe`` and ``resources/unsubscribe``. The tool ``touch``
(``{uri}``) bumps a resource's version and, if the resource is subscribed, sends
``notifications/resources/updated`` for it before answering ``touched <uri>``
(or ``touched <uri> (not subscribed)``). So a test decides which process — and
behind it which hub replica — produces an update.
"""

from __future__ import annotations

import json
import sys

URIS = ("watched://a", "watched://b")
TOOLS = [{"name": "touch", "description": "Change a resource and tell its subscribers.",
          "inputSchema": {"type": "object", "properties": {"uri": {"type": "string"}},
                          "required": ["uri"]}}]
_versions = dict.fromkeys(URIS, 1)
_subscribed: set[str] = set()


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _touch(uri: str) -> str:
    _versions[uri] = _versions.get(uri, 0) + 1
    if uri not in _subscribed:
        return f"touched {uri} (not subscribed)"
    send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}})
    return f"touched {uri}"


def result_of(method: object, params: dict[str, object]) -> dict[str, object] | None:
    """The result of a request, or None for an unknown method."""
    uri = str(params.get("uri", ""))
    if method == "initialize":
        return {"protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}, "resources": {"subscribe": True}},
                "serverInfo": {"name": "watched", "version": "1"}}
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        args = params.get("arguments") or {}
        assert isinstance(args, dict)
        return {"content": [{"type": "text", "text": _touch(str(args.get("uri", "")))}]}
    if method == "resources/list":
        return {"resources": [{"uri": u, "name": u.rsplit("/", 1)[-1], "mimeType": "text/plain"}
                              for u in URIS]}
    if method == "resources/read":
        return {"contents": [{"uri": uri, "mimeType": "text/plain",
                              "text": f"{uri} v{_versions.get(uri, 0)}"}]}
    if method == "resources/subscribe":
        _subscribed.add(uri)
        return {}
    if method == "resources/unsubscribe":
        _subscribed.discard(uri)
        return {}
    if method == "ping":
        return {}
    return None


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        params = message.get("params") or {}
        assert isinstance(params, dict)
        result = result_of(message["method"], params)
        if result is None:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": f"Method not found: {message['method']}"}})
        else:
            send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
