"""Name, attributes and metric labels shared by every span of one kind of request.

Built once per kind (method, target, transport, protocol version, session or
upstream) by :class:`~mcp_hub.telemetry.spans.Telemetry` and reused, so a span
costs a dict copy instead of a dozen attribute operations. Names and attributes
follow the OpenTelemetry MCP semantic conventions; labels stay bounded (tool
names only, and ``_OTHER`` for a tool the hub does not know).
"""

from __future__ import annotations

from typing import Any

__all__ = ["OTHER", "Shape", "client_shape", "server_shape"]

OTHER = "_OTHER"
#: The attribute that names a request's target, by method.
_TARGET_ATTR = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name",
                "resources/read": "mcp.resource.uri", "resources/subscribe": "mcp.resource.uri",
                "resources/unsubscribe": "mcp.resource.uri", "skills/get": "mcp.resource.uri",
                "resources/directory/read": "mcp.resource.uri"}


class Shape:
    """What every span of one kind of request shares: name, attributes, metric labels."""

    __slots__ = ("attrs", "labels", "name", "other")

    def __init__(self, name: str, attrs: dict[str, Any], labels: dict[str, str],
                 other: dict[str, str] | None = None) -> None:
        self.name = name
        self.attrs = attrs
        self.labels = labels
        #: The labels when the tool is not one the hub knows (``_OTHER``).
        self.other = other


def _safe_target(method: str, target: str | None) -> str | None:
    """A resource URI without credentials, query or fragment (they may hold secrets)."""
    if target is None or not method.startswith(("resources/", "skills/")):
        return target
    target = target.split("#", 1)[0].split("?", 1)[0]
    scheme, sep, rest = target.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        target = f"{scheme}://{rest.split('@', 1)[1]}"
    return target


def server_shape(key: tuple[Any, ...]) -> Shape:
    method, target, transport, version, session_id = key
    target = _safe_target(method, target)
    transport = transport or "pipe"
    attrs: dict[str, Any] = {"mcp.method.name": method, "network.transport": transport}
    labels = {"mcp.method.name": method, "network.transport": transport}
    if version:
        attrs["mcp.protocol.version"] = labels["mcp.protocol.version"] = version
    if session_id:
        attrs["mcp.session.id"] = session_id
    if transport == "tcp":
        attrs["network.protocol.name"] = "http"
    return _targeted(method, target, attrs, labels, unknown_tools=True)


def client_shape(key: tuple[Any, ...]) -> Shape:
    server, method, target, transport = key
    target = _safe_target(method, target)
    transport = "pipe" if transport == "stdio" else "tcp"
    labels = {"mcp.method.name": method, "mcp_hub.upstream.name": server,
              "network.transport": transport}
    return _targeted(method, target, dict(labels), labels, unknown_tools=False)


def _targeted(method: str, target: str | None, attrs: dict[str, Any], labels: dict[str, str],
              *, unknown_tools: bool) -> Shape:
    """The shape of ``method`` on ``target``: its target attribute and, for a tool call,
    the operation name and the tool as a label; with ``unknown_tools`` also the labels
    for a tool the hub does not know (``_OTHER``)."""
    other = None
    if target is not None:
        attr = _TARGET_ATTR.get(method)
        if attr is not None:
            attrs[attr] = target
        if method == "tools/call":
            attrs["gen_ai.operation.name"] = "execute_tool"
            if unknown_tools:
                other = {**labels, "gen_ai.tool.name": OTHER}
            labels["gen_ai.tool.name"] = target
    return Shape(f"{method} {target}" if target else method, attrs, labels, other)
