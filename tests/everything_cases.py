"""What to call on ``@modelcontextprotocol/server-everything`` and how to compare answers.

The tool list itself is discovered at test time; this module holds only the
good arguments for the tools known today, a filler that derives arguments from
an ``inputSchema`` for tools added later (and fails loudly when it cannot), the
client side of sampling / elicitation / roots, and the normalisations that make
a direct answer and an answer through the hub comparable.

Every normalisation is listed in :func:`normalise` with the reason it is
legitimate: each one removes a value the server computes afresh on every call
(time of day, session id) or takes from its process environment, never a value
the hub could have changed.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import anyio
import mcp_types as types

#: A data: URI, so ``gzip-file-as-resource`` never touches the network.
GZIP_DATA = "data:text/plain;base64," + base64.b64encode(b"mcp-hub\n" * 64).decode()

#: Argument sets per known tool; a tool with several sets is called once per set,
#: in order (the toggles: on, then off again).
TOOL_ARGS: dict[str, list[dict[str, Any]]] = {
    "echo": [{"message": "héllo through the hub"}],
    "get-annotated-message": [{"messageType": "error", "includeImage": True},
                              {"messageType": "debug"}],
    "get-env": [{}],
    "get-resource-links": [{"count": 4}],
    "get-resource-reference": [{"resourceType": "Text", "resourceId": 2},
                               {"resourceType": "Blob", "resourceId": 3}],
    "get-structured-content": [{"location": "Chicago"}],
    "get-sum": [{"a": 2, "b": 40.5}],
    "get-tiny-image": [{}],
    "gzip-file-as-resource": [
        {"name": "hub-case.txt.gz", "data": GZIP_DATA, "outputType": "resource"},
        {"name": "hub-case.txt.gz", "data": GZIP_DATA, "outputType": "resourceLink"},
    ],
    "toggle-simulated-logging": [{}, {}],
    "toggle-subscriber-updates": [{}, {}],
    "trigger-long-running-operation": [{"duration": 0.3, "steps": 3}],
    "get-roots-list": [{}],
    "trigger-elicitation-request": [{}],
    # An explicit elicitationId: the server would pick a random UUID otherwise.
    "trigger-url-elicitation": [{"url": "https://example.com/consent",
                                 "elicitationId": "hub-consent-1"}],
    "trigger-sampling-request": [{"prompt": "Say hi to the hub", "maxTokens": 7}],
    # taskSupport "required": a plain tools/call is refused with the same error
    # directly and through the hub (neither client does MCP tasks).
    "simulate-research-query": [{"topic": "python"}],
    # Registered only for clients that run sampling / elicitation as tasks; the SDK
    # client does not, so today they are never listed. Should that change, their
    # no-argument call is still compared.
    "trigger-sampling-request-async": [{}],
    "trigger-elicitation-request-async": [{}],
}

#: Tools whose progress notifications are collected and compared.
PROGRESS_TOOLS = {"trigger-long-running-operation"}

PROMPT_ARGS: dict[str, dict[str, str]] = {
    "simple-prompt": {},
    "args-prompt": {"city": "Paris", "state": "Texas"},
    "completable-prompt": {"department": "Sales", "name": "Eve"},
    "resource-prompt": {"resourceType": "Blob", "resourceId": "2"},
}


class UnfillableSchema(Exception):
    """A tool or prompt nobody told us about needs an argument we cannot invent."""


def args_for_tool(tool: types.Tool) -> list[dict[str, Any]]:
    """The argument sets for ``tool``: the table's, else filled from its inputSchema."""
    known = TOOL_ARGS.get(tool.name)
    if known is not None:
        return known
    return [fill_from_schema(tool.name, tool.input_schema)]


def fill_from_schema(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for every required property of ``schema``; raises if one cannot be made."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key in schema.get("required") or []:
        out[key] = _value_for(name, key, props.get(key) or {})
    return out


def _value_for(tool: str, key: str, prop: dict[str, Any]) -> Any:
    if "default" in prop:
        return prop["default"]
    if "const" in prop:
        return prop["const"]
    if prop.get("enum"):
        return prop["enum"][0]
    kind = prop.get("type")
    if kind == "string":
        fmt = prop.get("format")
        if fmt in ("uri", "url"):
            return "https://example.com/"
        if fmt is None:
            return "mcp-hub"
    if kind in ("number", "integer"):
        low = prop.get("minimum", prop.get("exclusiveMinimum", 0))
        return int(low) + 1
    if kind == "boolean":
        return False
    if kind == "object" and not prop.get("required"):
        return {}
    if kind == "array" and not prop.get("minItems"):
        return []
    raise UnfillableSchema(
        f"server-everything has a new tool {tool!r} whose required argument {key!r} "
        f"({json.dumps(prop)}) cannot be filled from its schema: add it to TOOL_ARGS "
        "in tests/everything_cases.py")


# ── normalisation ─────────────────────────────────────────────────────────────

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: ``new Date().toLocaleTimeString()`` in the dynamic resources ("4:13:28 AM").
_TIME = re.compile(r"created at \d{1,2}:\d{2}:\d{2}(?:\s?[AP]M)?")


def normalise(value: Any, *, same_process: bool) -> Any:
    """``value`` (plain JSON) with the legitimately varying parts replaced.

    1. Time of day: the dynamic text and blob resources say ``created at <local
       time>``; the two answers are made at different seconds. Blobs are decoded
       first so the time inside them is replaced too.
    2. Session ids: over Streamable HTTP the toggles and simulated log messages
       name the upstream session (a random UUID per session; the hub holds its own
       session to the server).
    3. The environment: ``get-env`` prints the server process's environment. On
       stdio the direct server and the hub's server are two processes started by
       different parents, so only the shape is compared (a JSON object of
       strings). Over HTTP both sessions talk to one process and the text is
       compared exactly (``same_process``).
    """
    if isinstance(value, dict):
        out = {k: normalise(v, same_process=same_process) for k, v in value.items()}
        if isinstance(out.get("blob"), str):
            out["blob"] = _normalise_blob(out["blob"])
        text = out.get("text")
        if isinstance(text, str) and not same_process and _is_env_dump(text):
            out["text"] = "<environment of the server process>"
        return out
    if isinstance(value, list):
        return [normalise(v, same_process=same_process) for v in value]
    if isinstance(value, str):
        return _UUID.sub("<uuid>", _TIME.sub("created at <time>", value))
    return value


def _normalise_blob(blob: str) -> str:
    try:
        raw = base64.b64decode(blob, validate=True).decode()
    except ValueError:
        return blob
    if "created at" not in raw:
        return blob
    return "<base64 of> " + _TIME.sub("created at <time>", raw)


def _is_env_dump(text: str) -> bool:
    if not text.startswith("{"):
        return False
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return (isinstance(data, dict) and "PATH" in data
            and all(isinstance(v, str) for v in data.values()))


def plain(model: Any) -> Any:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


# ── the client side ───────────────────────────────────────────────────────────

ROOTS = [types.Root(uri="file:///srv/project", name="project"),
         types.Root(uri="file:///srv/data")]
FORM_ANSWER = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com",
               "integer": 7, "number": 2.5}


class Client:
    """Callbacks for one client session; records what the server asked and sent."""

    def __init__(self) -> None:
        self.sampled: list[Any] = []
        self.elicited: list[Any] = []
        self.roots_asked = 0
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.messages: list[Any] = []
        self._moved = anyio.Event()

    def _poke(self) -> None:
        self._moved.set()
        self._moved = anyio.Event()

    async def sampling(self, context: Any, params: types.CreateMessageRequestParams) -> Any:
        self.sampled.append(plain(params))
        return types.CreateMessageResult(
            role="assistant", model="fixed-model", stop_reason="endTurn",
            content=types.TextContent(type="text", text="Hi, hub."))

    async def elicitation(self, context: Any, params: Any) -> Any:
        self.elicited.append(plain(params))
        if getattr(params, "mode", None) == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=FORM_ANSWER)

    async def list_roots(self, context: Any) -> types.ListRootsResult:
        self.roots_asked += 1
        return types.ListRootsResult(roots=ROOTS)

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)
        self._poke()

    async def message(self, message: Any) -> None:
        self.messages.append(message)
        self._poke()

    def kwargs(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sampling,
            "elicitation_callback": self.elicitation,
            "list_roots_callback": self.list_roots,
            "logging_callback": self.logging,
            "message_handler": self.message,
        }

    async def until(self, predicate: Any) -> None:
        """Wait until ``predicate()`` holds, re-checking on every log or message
        (bound the wait with ``anyio.fail_after``)."""
        while not predicate():
            await self._moved.wait()

    async def more_of(self, kind: type[Any], seen: int) -> int:
        """Wait until more than ``seen`` messages of ``kind`` arrived; their count now."""
        while len(self.of_type(kind)) <= seen:
            await self._moved.wait()
        return len(self.of_type(kind))

    def of_type(self, kind: type[Any]) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]
