"""A 2026-07-28 upstream written without an SDK, answering the way older servers do (stdio).

It speaks JSON-RPC lines by hand: ``server/discover`` (2026-07-28 only, with
``resultType``), and then results **without** ``resultType`` — which the
specification says a client must read as ``complete`` — for ``tools/call``,
``prompts/get``, ``resources/read`` and the three lists (which carry their
``ttlMs``/``cacheScope``). ``subscriptions/listen`` is not served (-32601).

Tool ``show {text}`` answers a text block and a 1×1 PNG image block;
``needs_sampling`` answers ``-32021`` (missing required client capability,
``data.requiredCapabilities = {"sampling": {}}``) unless the request's
``_meta`` declares the ``sampling`` client capability, else the text
``sampling declared``; prompt
``greet {name}``; resource ``SCHEME://note`` and template ``SCHEME://items/{id}``
(SCHEME is the first argument, default ``bare``). ``resources/read`` of any
other URI answers the error ``-32602 Resource not found`` with
``data: {"uri": ..., "hint": SCHEME}``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
       "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
CACHE = {"ttlMs": 0, "cacheScope": "private"}
TOOLS = [
    {"name": "show", "description": "Text and an image.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "needs_sampling", "description": "Runs only for a client that can sample.",
     "inputSchema": {"type": "object", "properties": {}}},
]
CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SCHEME = sys.argv[1] if len(sys.argv) > 1 else "bare"
NOTE = f"{SCHEME}://note"


def _discover() -> dict[str, Any]:
    return {"supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": True}, "prompts": {}, "resources": {}},
            "serverInfo": {"name": "bare-modern", "version": "1.0.0"},
            "resultType": "complete", **CACHE}


def _call(params: dict[str, Any]) -> dict[str, Any]:
    if params.get("name") == "needs_sampling":
        declared = (params.get("_meta") or {}).get(CAPABILITIES) or {}
        if "sampling" not in declared:
            raise MissingCapability
        return {"content": [{"type": "text", "text": "sampling declared"}]}
    text = str((params.get("arguments") or {}).get("text", ""))
    return {"content": [{"type": "text", "text": f"shown:{text}"},
                        {"type": "image", "data": PNG, "mimeType": "image/png"}]}


def _prompt(params: dict[str, Any]) -> dict[str, Any]:
    name = str((params.get("arguments") or {}).get("name", "?"))
    return {"messages": [{"role": "user", "content": {"type": "text", "text": f"hello {name}"}}]}


class MissingCapability(Exception):
    """The client did not declare what this tool needs."""


class NotFound(Exception):
    """``resources/read`` of a URI this server does not have."""


def _read(params: dict[str, Any]) -> dict[str, Any]:
    uri = str(params.get("uri"))
    if uri != NOTE:
        raise NotFound(uri)
    return {"contents": [{"uri": NOTE, "mimeType": "text/plain", "text": "a note"}]}


def _answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The result for ``method``; None when this server does not serve it."""
    if method == "server/discover":
        return _discover()
    if method == "tools/list":
        return {"tools": TOOLS, **CACHE}
    if method == "prompts/list":
        return {"prompts": [{"name": "greet", "arguments": [{"name": "name"}]}], **CACHE}
    if method == "resources/list":
        return {"resources": [{"uri": NOTE, "name": "note"}], **CACHE}
    if method == "resources/templates/list":
        return {"resourceTemplates": [{"uriTemplate": f"{SCHEME}://items/{{id}}",
                                       "name": "item"}], **CACHE}
    handlers = {"tools/call": _call, "prompts/get": _prompt, "resources/read": _read}
    handler = handlers.get(method)
    return handler(params) if handler is not None else None


def _reply(message: dict[str, Any]) -> dict[str, Any]:
    base = {"jsonrpc": "2.0", "id": message["id"]}
    try:
        result = _answer(str(message.get("method")), message.get("params") or {})
    except MissingCapability:
        return {**base, "error": {"code": -32021, "message": "Missing required client capability",
                                  "data": {"requiredCapabilities": {"sampling": {}}}}}
    except NotFound as exc:
        return {**base, "error": {"code": -32602, "message": "Resource not found",
                                  "data": {"uri": str(exc), "hint": SCHEME}}}
    if result is None:
        return {**base, "error": {"code": -32601, "message": "Method not found"}}
    return {**base, "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue  # notifications and answers: nothing to say
        sys.stdout.write(json.dumps(_reply(message)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
