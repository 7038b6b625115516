"""Reading upstream answers the way the specification says to, not stricter.

The 2026-07-28 schema gives every result a ``resultType``, and the SDK's client
validates each answer of a 2026-07-28 session against that schema, so an answer
without it fails whole ("``CallToolResult.resultType: Field required``"), content
and all. The specification itself says what an absent ``resultType`` means: a
client "MUST treat the absent field as ``complete``". Servers written before the
field existed (or that add it only to some results, as the reference TypeScript
server does for ``tools/call``) answer that way.

:class:`LenientDispatcher` is the SDK's JSON-RPC dispatcher with one change: on a
2026-07-28 session, a result without ``resultType`` gets ``"complete"`` before
the SDK validates it. Nothing is dropped; a result whose meaning is unclear
(another ``resultType``, a missing required field) is still refused by the SDK
and reported by the caller with what was wrong. A 2025 session is untouched:
its results have no ``resultType`` and the SDK drops the field if one comes.

Every upstream session of the hub is made by :func:`upstream_session`, so the
rule is the same on every path: the shared connection (lean call, SDK path,
input rounds, lists, ``server/discover``) and the per-user sessions.

The same dispatcher says, on a 2026-07-28 session, what the *downstream* client
can answer: a 2026-07-28 request carries the client's capabilities in its
``_meta``, and the SDK stamps the hub's own (sampling, elicitation and roots:
the hub relays all three). While a downstream call runs (:func:`declaring`),
those three are narrowed to the ones its client declared, so an upstream that
needs one the client lacks answers ``-32021`` (missing required client
capability) itself, instead of asking a question nobody can answer.

Extensions the same way (:data:`mcp_hub.protocol.apps.RELAYED_EXTENSIONS`, MCP Apps):
every upstream session declares, as a client, the extensions the hub passes on.
On a 2026-07-28 session each downstream call's ``_meta`` then carries exactly
the passed-on extensions *its* client declared, with that client's settings
(none: no ``extensions`` at all), so an Apps server answers an Apps host with
its UI and any other client with its text fallback. A 2025 session's
capabilities are fixed by its one ``initialize``; it keeps the hub's
declaration for every caller (docs/protocol.md, "Extensions").
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.types import ClientCapabilities, RequestId
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from mcp_hub.protocol.apps import RELAYED_EXTENSIONS

__all__ = ["COMPLETE", "LenientDispatcher", "declaring", "upstream_session"]

logger = logging.getLogger("mcp_hub.upstream")

#: What an absent ``resultType`` means (2026-07-28, "Result").
COMPLETE = "complete"
#: The capabilities the hub relays to its downstream client, by ``_meta`` key.
RELAYED = ("sampling", "elicitation", "roots")
#: The downstream client's capabilities while one of its calls is sent upstream.
_declared: contextvars.ContextVar[ClientCapabilities | None] = contextvars.ContextVar(
    "mcp_hub_declared_capabilities", default=None)


@contextmanager
def declaring(capabilities: ClientCapabilities | None) -> Iterator[None]:
    """Requests sent upstream inside this block speak for a client with ``capabilities``
    (None: the hub's own request, its own capabilities)."""
    token = _declared.set(capabilities)
    try:
        yield
    finally:
        _declared.reset(token)


def _narrowed(params: Mapping[str, Any], declared: ClientCapabilities) -> Mapping[str, Any]:
    """``params`` with the relayed capabilities in ``_meta`` cut to the ones ``declared``."""
    meta = params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(caps, Mapping):
        return params
    drop = [key for key in RELAYED if key in caps and getattr(declared, key, None) is None]
    extensions = _declared_extensions(caps, declared)
    if not drop and extensions == caps.get("extensions"):
        return params
    kept = {key: value for key, value in caps.items() if key not in drop and key != "extensions"}
    if extensions:
        kept["extensions"] = extensions
    return {**params, "_meta": {**meta, CLIENT_CAPABILITIES_META_KEY: kept}}  # type: ignore[dict-item]


def _declared_extensions(caps: Mapping[str, Any], declared: ClientCapabilities
                         ) -> dict[str, Any] | None:
    """The hub's declared ``extensions`` cut to the ones the client declared, with the
    client's own settings (None when none is left)."""
    ours = caps.get("extensions")
    theirs = declared.extensions
    if not isinstance(ours, Mapping) or not theirs:
        return None
    kept = {key: dict(theirs[key]) for key in ours if key in theirs}
    return kept or None


def _never() -> bool:
    return False


class LenientDispatcher(JSONRPCDispatcher[Any]):
    """The SDK's dispatcher; a 2026-07-28 result without ``resultType`` reads as complete."""

    def __init__(self, *args: Any, server: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server = server
        #: Whether the session speaks 2026-07-28; set by :func:`upstream_session`.
        self.modern: Callable[[], bool] = _never
        self._noted = False

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None,
        opts: CallOptions | None = None, *, _related_request_id: RequestId | None = None,
    ) -> dict[str, Any]:
        if method == "initialize" and params is not None:
            params = with_task_requests(params)
        declared = _declared.get()
        if declared is not None and params is not None and self.modern():
            params = _narrowed(params, declared)
        raw = await super().send_raw_request(method, params, opts,
                                             _related_request_id=_related_request_id)
        if "resultType" not in raw and self.modern():
            raw["resultType"] = COMPLETE
            self._note(method)
        return raw

    def _note(self, method: str) -> None:
        """Say once per session that the upstream leaves ``resultType`` out."""
        if not self._noted:
            self._noted = True
            logger.info("upstream %s: %s answered without resultType; read as %r (the "
                        "specification's meaning of an absent resultType)",
                        self.server or "?", method, COMPLETE)


#: What the hub's upstream session says of task-augmented requests it receives
#: (2025-11-25): it takes sampling and elicitation requests with a ``task``. It
#: answers them at once, with the calling client's answer (``mcp_hub.upstream.relays``),
#: which the specification lets a receiver do; a server's async tools that need the
#: declaration are then offered and work through the hub.
TASK_REQUESTS: dict[str, Any] = {"requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}}


def with_task_requests(params: Mapping[str, Any]) -> dict[str, Any]:
    """``initialize`` params whose client capabilities take task-augmented requests."""
    caps = params.get("capabilities")
    caps = dict(caps) if isinstance(caps, Mapping) else {}
    caps.setdefault("tasks", TASK_REQUESTS)
    return {**params, "capabilities": caps}


def upstream_session(read: Any, write: Any, *, server: str, **options: Any) -> ClientSession:
    """A ``ClientSession`` on ``read``/``write`` with the :class:`LenientDispatcher`."""
    dispatcher = LenientDispatcher(read, write, server=server)
    options.setdefault("extensions", {key: dict(value) for key, value in RELAYED_EXTENSIONS.items()})
    session = ClientSession(dispatcher=dispatcher, **options)
    dispatcher.modern = lambda: session.protocol_version in MODERN_PROTOCOL_VERSIONS
    return session
