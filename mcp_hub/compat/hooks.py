"""Every private hook the hub relies on, and the start-up check of each.

A :class:`Hook` names one private thing (a method with its parameters, an
attribute of a fresh instance, a name in a private module) and the feature it
serves. :func:`check_hooks` probes them all against the libraries installed
now; :func:`enforce` runs at start-up: a missing hook whose feature has a safe
fallback turns that feature off with one warning naming the hook; one without
(``required``) stops the hub with an error naming it. Features ask
:func:`feature_ok` before they take their private path.

A probe imports what it checks. The features in :data:`ON_DEMAND` belong to
parts of a config (HTTP serving, replicas, ``[auth]``, OTLP export) whose
libraries a hub without that part never loads; :func:`enforce` probes them only
when the config uses them, and :func:`feature_ok` probes one feature when it is
first asked, so a plain stdio hub does not import the OTLP exporter (with
requests, urllib3 and protobuf) just to check a hook it never takes.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from mcp_hub.errors import IncompatibleLibrary

__all__ = ["HOOKS", "ON_DEMAND", "Hook", "HookProblem", "check_hooks", "enforce", "feature_ok"]

logger = logging.getLogger("mcp_hub.compat")

#: Features, each with what happens when one of its hooks is missing.
HTTP_SESSIONS = "HTTP sessions (session cap, eviction, resume, replicas)"
HTTP_FAST_PATH = "the HTTP fast path"
REPLICA_BUS = "messages between replicas"
STDIO_SERVER = "the stdio server"
MODERN_UPSTREAMS = "2026-07-28 upstreams (protocol = \"2026\" or \"auto\")"
LEAN_CALL = "the lean upstream tools/call"
JWT_KEYS = "JWT key checks ([auth])"
OTLP_DURATIONS = "the hub's duration histograms over OTLP"
CHILD_CLEANUP = "closing a stdio child's pipes at once"
SDK_SPANS_OFF = "switching off the SDK's per-message spans"

#: Features of a config part, probed only when that part is in use (see the module text).
ON_DEMAND = frozenset({HTTP_SESSIONS, HTTP_FAST_PATH, REPLICA_BUS, JWT_KEYS, OTLP_DURATIONS})

_MANAGER = "mcp.server.streamable_http_manager:StreamableHTTPSessionManager"
_TRANSPORT = "mcp.server.streamable_http:StreamableHTTPServerTransport"


@dataclass(frozen=True)
class Hook:
    """One private name the hub uses, how to probe it, and what it serves."""

    feature: str
    name: str
    probe: Callable[[], str | None]
    #: No safe fallback: the hub refuses to start when the feature is in use.
    required: bool = False


@dataclass(frozen=True)
class HookProblem:
    """A hook that is missing or changed shape."""

    hook: Hook
    detail: str

    def __str__(self) -> str:
        return f"{self.hook.name}: {self.detail} (needed by {self.hook.feature})"


def _load(spec: str) -> Any:
    module, _, attr = spec.partition(":")
    value: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


def _method(spec: str, name: str, params: tuple[str, ...]) -> Callable[[], str | None]:
    """The class at ``spec`` has method ``name`` taking exactly ``params`` after self."""
    def probe() -> str | None:
        member = getattr(_load(spec), name, None)
        if not callable(member):
            return "no such method"
        got = tuple(p for p in inspect.signature(member).parameters if p != "self")
        return None if got == params else f"parameters are {got}, expected {params}"
    return probe


def _attribute(factory: Callable[[], Any], name: str, kind: type | None = None) -> Callable[[], str | None]:
    """A fresh instance from ``factory`` has attribute ``name`` (of type ``kind``)."""
    def probe() -> str | None:
        instance = factory()
        if not hasattr(instance, name):
            return "no such attribute"
        value = getattr(instance, name)
        if kind is not None and not isinstance(value, kind):
            return f"is a {type(value).__name__}, expected {kind.__name__}"
        return None
    return probe


def _name(spec: str) -> Callable[[], str | None]:
    """``module:attr`` imports."""
    def probe() -> str | None:
        _load(spec)
        return None
    return probe


def _manager() -> Any:
    cls = _load(_MANAGER)
    return cls(app=object())


def _transport() -> Any:
    cls = _load(_TRANSPORT)
    return cls(mcp_session_id=None, idle_timeout=60.0)


def _pending_fields() -> str | None:
    pending = _load("mcp.shared.jsonrpc_dispatcher:_Pending")
    fields = set(getattr(pending, "__dataclass_fields__", {}))
    expected = {"send", "receive", "on_progress"}
    return None if fields == expected else f"fields are {sorted(fields)}, expected {sorted(expected)}"


def _jwk_data() -> str | None:
    jwt = importlib.import_module("jwt")
    key = jwt.PyJWK({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"})
    data = getattr(key, "_jwk_data", None)
    return None if isinstance(data, dict) and data.get("kty") == "OKP" else "no _jwk_data dict"


def _exporter_preferences() -> str | None:
    try:
        otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.metric_exporter")
    except ImportError:
        return None  # the otel extra is not installed: nothing to check
    exporter = otlp.OTLPMetricExporter()
    missing = [n for n in ("_preferred_temporality", "_preferred_aggregation")
               if not isinstance(getattr(exporter, n, None), dict)]
    return f"no {', '.join(missing)} dict" if missing else None


HOOKS: tuple[Hook, ...] = (
    Hook(HTTP_SESSIONS, f"{_MANAGER}._handle_stateful_request",
         _method(_MANAGER, "_handle_stateful_request", ("scope", "receive", "send")), required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._admit_session",
         _method(_MANAGER, "_admit_session", ("requestor",)), required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._serve_opening_request",
         _method(_MANAGER, "_serve_opening_request", ("http_transport", "scope", "receive", "send")),
         required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._discard_session",
         _method(_MANAGER, "_discard_session", ("session_id", "transport")), required=True),
    Hook(HTTP_SESSIONS, "mcp.server.runner:ServerRunner._negotiate_initialize",
         _method("mcp.server.runner:ServerRunner", "_negotiate_initialize", ("params",)),
         required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._server_instances", _attribute(_manager, "_server_instances", dict),
         required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._session_owners", _attribute(_manager, "_session_owners", dict),
         required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._task_group", _attribute(_manager, "_task_group"), required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._session_creation_lock",
         _attribute(_manager, "_session_creation_lock"), required=True),
    Hook(HTTP_SESSIONS, f"{_MANAGER}._lifespan_state", _attribute(_manager, "_lifespan_state"),
         required=True),
    Hook(HTTP_FAST_PATH, f"{_TRANSPORT}._requests_in_flight",
         _attribute(_transport, "_requests_in_flight", int)),
    Hook(HTTP_FAST_PATH, f"{_TRANSPORT}._idle_timeout", _attribute(_transport, "_idle_timeout", float)),
    Hook(REPLICA_BUS, f"{_TRANSPORT}._request_streams", _attribute(_transport, "_request_streams", dict),
         required=True),
    Hook(REPLICA_BUS, f"{_TRANSPORT}._read_stream_writer", _attribute(_transport, "_read_stream_writer"),
         required=True),
    Hook(REPLICA_BUS, f"{_TRANSPORT}._write_stream", _attribute(_transport, "_write_stream"), required=True),
    Hook(STDIO_SERVER, "mcp.shared._context_streams:create_context_streams",
         _name("mcp.shared._context_streams:create_context_streams"), required=True),
    Hook(STDIO_SERVER, "mcp.shared._stream_protocols:ReadStream",
         _name("mcp.shared._stream_protocols:ReadStream"), required=True),
    Hook(MODERN_UPSTREAMS, "mcp.client._input_required:run_input_required_driver",
         _name("mcp.client._input_required:run_input_required_driver"), required=True),
    Hook(MODERN_UPSTREAMS, "mcp.client._probe:negotiate_auto",
         _name("mcp.client._probe:negotiate_auto"), required=True),
    Hook(LEAN_CALL, "mcp.shared.jsonrpc_dispatcher:_Pending", _pending_fields),
    Hook(LEAN_CALL, "mcp.client.session:_later_revision_fields",
         _name("mcp.client.session:_later_revision_fields")),
    Hook(JWT_KEYS, "jwt.PyJWK._jwk_data", _jwk_data, required=True),
    Hook(OTLP_DURATIONS, "opentelemetry MetricExporter._preferred_temporality", _exporter_preferences),
    Hook(SDK_SPANS_OFF, "mcp.server._otel:OpenTelemetryMiddleware",
         _name("mcp.server._otel:OpenTelemetryMiddleware")),
)


def _run(hook: Hook) -> str | None:
    try:
        return hook.probe()
    except Exception as exc:  # an import or constructor that changed: report, never crash
        return f"{type(exc).__name__}: {exc}"


def check_hooks(hooks: Collection[Hook] = HOOKS) -> list[HookProblem]:
    """Every hook in ``hooks`` that is missing or changed, with what is wrong."""
    problems = []
    for hook in hooks:
        detail = _run(hook)
        if detail is not None:
            problems.append(HookProblem(hook, detail))
    return problems


@functools.cache
def _feature_problems(feature: str) -> tuple[HookProblem, ...]:
    return tuple(check_hooks([h for h in HOOKS if h.feature == feature]))


def feature_ok(feature: str) -> bool:
    """Whether every hook of ``feature`` is as expected (checked once per process, when
    first asked)."""
    return not _feature_problems(feature)


def enforce(in_use: Collection[str]) -> list[HookProblem]:
    """The start-up check: warn once for each missing hook of a feature that can be off;
    raise :class:`IncompatibleLibrary` for a required one of a feature in ``in_use``.

    The features of :data:`ON_DEMAND` are probed only when in ``in_use``."""
    features = dict.fromkeys(h.feature for h in HOOKS
                             if h.feature in in_use or h.feature not in ON_DEMAND)
    problems = [p for feature in features for p in _feature_problems(feature)]
    fatal = [p for p in problems if p.hook.required and p.hook.feature in in_use]
    if fatal:
        raise IncompatibleLibrary(
            "an installed library changed in a way this hub cannot work with: "
            + "; ".join(str(p) for p in fatal)
            + " — install the versions in requirements.lock")
    for problem in problems:
        if not problem.hook.required:
            logger.warning("%s: %s is off", problem, problem.hook.feature)
    return problems
