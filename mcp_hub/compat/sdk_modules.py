"""Names from the MCP SDK's private modules, imported here and only here.

* the stdio server's context-carrying streams (``mcp.shared._context_streams``,
  ``mcp.shared._stream_protocols``): the hub's own stdio transport hands the SDK
  server the same streams the SDK's transport would;
* the 2026-07-28 client's input-round driver and its era negotiation
  (``mcp.client._input_required``, ``mcp.client._probe``), which the hub runs
  for upstreams of that era;
* the list of fields a later protocol revision adds to a result
  (``mcp.client.session._later_revision_fields``), dropped as the SDK drops them;
* the SDK server's OpenTelemetry middleware class (``mcp.server._otel``), which
  the hub takes out of the server's middleware list.

A module that moved fails :func:`mcp_hub.compat.check_hooks` by name; the import
here then leaves the name unbound (``None``) instead of failing the hub's import,
so the start-up check can say what changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["ReadStream", "SdkOtelMiddleware", "WriteStream", "create_context_streams",
           "later_revision_fields", "negotiate_auto", "run_input_required_driver"]

if TYPE_CHECKING:
    from mcp.shared._stream_protocols import ReadStream, WriteStream
else:
    try:
        from mcp.shared._stream_protocols import ReadStream, WriteStream
    except ImportError:  # pragma: no cover - reported by the start-up check
        ReadStream = WriteStream = Any

create_context_streams: Any
run_input_required_driver: Any
negotiate_auto: Any
later_revision_fields: Any
SdkOtelMiddleware: Any

try:
    from mcp.shared._context_streams import create_context_streams
except ImportError:  # pragma: no cover - reported by the start-up check
    create_context_streams = None
try:
    from mcp.client._input_required import run_input_required_driver
    from mcp.client._probe import negotiate_auto
except ImportError:  # pragma: no cover - reported by the start-up check
    run_input_required_driver = negotiate_auto = None
try:
    from mcp.client.session import _later_revision_fields as later_revision_fields
except ImportError:  # pragma: no cover - reported by the start-up check
    later_revision_fields = None
try:
    from mcp.server._otel import OpenTelemetryMiddleware as SdkOtelMiddleware
except ImportError:  # pragma: no cover - reported by the start-up check
    SdkOtelMiddleware = None
