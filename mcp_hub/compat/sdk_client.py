"""The SDK client's dispatcher insides that the lean ``tools/call`` uses.

:mod:`mcp_hub.upstream.lean_call` writes one request on a live session without
the SDK's per-request machinery: it takes an id from the session's dispatcher,
enters its waiter in the dispatcher's table of pending requests, and writes the
message with the headers the session would stamp. None of that is public; it is
all here. :func:`lean_dispatcher` answers whether a session's dispatcher is the
one this module knows (checked once per session): if not, the SDK's own path runs.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mcp.client.session import ClientSession
from mcp.shared import jsonrpc_dispatcher as _jsonrpc_dispatcher
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from mcp_hub.compat.hooks import LEAN_CALL, feature_ok

__all__ = ["allocate_id", "dispatcher_open", "lean_dispatcher", "pending_table", "send_raw",
           "stamp", "write_stream"]

#: What the dispatcher must have for the lean path to use it.
_NEEDED = ("_pending", "_allocate_id", "_running", "_closed", "_write_stream", "notify")
#: The dispatcher's pending entry has the fields the lean waiter stands in for (the
#: dispatcher reads ``send`` and ``on_progress``); another SDK's may not: SDK path then.
_KNOWN_PENDING = set(getattr(_jsonrpc_dispatcher, "_Pending", object).__dict__.get(
    "__dataclass_fields__", {})) == {"send", "receive", "on_progress"}
#: The attribute that remembers, on the session, whether its dispatcher is the known one.
_FIT = "_mcp_hub_lean_fit"


def lean_dispatcher(session: ClientSession) -> JSONRPCDispatcher[Any] | None:
    """The session's dispatcher when the lean path can use it; None for the SDK's path."""
    if not feature_ok(LEAN_CALL):
        return None
    dispatcher = getattr(session, "_dispatcher", None)
    fit = getattr(session, _FIT, None)
    if fit is None:
        fit = (_KNOWN_PENDING
               and isinstance(dispatcher, JSONRPCDispatcher)
               and all(hasattr(dispatcher, name) for name in _NEEDED)
               and isinstance(getattr(dispatcher, "_pending", None), dict)
               and callable(getattr(session, "_stamp", None)))
        with contextlib.suppress(AttributeError):  # a session without __dict__: ask again
            setattr(session, _FIT, fit)
    if not fit:
        return None
    return dispatcher


def dispatcher_open(dispatcher: JSONRPCDispatcher[Any]) -> bool:
    """Whether the dispatcher still runs its receive loop."""
    return not dispatcher._closed and bool(dispatcher._running)


def pending_table(dispatcher: JSONRPCDispatcher[Any]) -> dict[Any, Any]:
    """The dispatcher's table of requests awaiting an answer, by id."""
    pending: dict[Any, Any] = dispatcher._pending
    return pending


def allocate_id(dispatcher: JSONRPCDispatcher[Any]) -> Any:
    """A fresh request id from the dispatcher's own counter."""
    return dispatcher._allocate_id()


def write_stream(dispatcher: JSONRPCDispatcher[Any]) -> Any:
    """The stream the dispatcher writes messages to."""
    return dispatcher._write_stream


def stamp(session: ClientSession, data: dict[str, Any], opts: Any) -> None:
    """Stamp a request as the session would (protocol headers, era fields)."""
    session._stamp(data, opts)  # type: ignore[attr-defined]


async def send_raw(session: ClientSession, method: str, params: dict[str, Any],
                   on_progress: Any = None) -> dict[str, Any]:
    """Send ``method`` on the session's dispatcher and return the answer's result as sent.

    For requests whose answer the SDK's typed ``send_request`` would refuse: a
    task-augmented ``tools/call`` is answered with a ``CreateTaskResult``, which the
    ``tools/call`` result surface does not describe, and ``tasks/*`` answers are passed
    on whole. Errors are raised as ``MCPError``, as ``send_request`` raises them.
    """
    data: dict[str, Any] = {"method": method, "params": params}
    opts: CallOptions = {}
    session._stamp(data, opts)  # type: ignore[attr-defined]
    if on_progress is not None:
        opts["on_progress"] = on_progress
    dispatcher = session._dispatcher
    result: dict[str, Any] = await dispatcher.send_raw_request(method, data.get("params"), opts)
    return result
