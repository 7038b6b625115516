"""``[telemetry]``: where traces and metrics go, resolved with the standard ``OTEL_*`` variables.

Telemetry is off unless an OTLP endpoint is named, in the config
(``otlp_endpoint``) or in the environment (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``). ``OTEL_SDK_DISABLED=true`` or
``enabled = false`` turn it off whatever else is set. A key set in the config
wins over its variable; a key left out falls back to the variable, then to the
default. This module imports only pydantic, so the config can load without
OpenTelemetry installed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ResolvedTelemetry", "TelemetryConfig", "resolve"]

DEFAULT_SERVICE_NAME = "mcp-hub"


class TelemetryConfig(BaseModel):
    """``[telemetry]`` in ``servers.toml``."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    #: None: on exactly when an endpoint is known (config or ``OTEL_*``); False: always off.
    enabled: bool | None = None
    #: Base URL of an OTLP/HTTP receiver, e.g. ``http://collector:4318`` (``/v1/traces``
    #: and ``/v1/metrics`` are appended).
    otlp_endpoint: str | None = None
    #: ``service.name`` of the hub's resource (default ``OTEL_SERVICE_NAME``, then "mcp-hub").
    service_name: str | None = None
    #: Share of new traces to record, 0..1 (default ``OTEL_TRACES_SAMPLER_ARG``, then 1.0).
    #: A request that carries a trace context follows its caller's sampling decision.
    sample_ratio: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Export OpenTelemetry metrics too (the operation-duration histograms).
    metrics: bool = True
    #: Seconds between metric exports (default ``OTEL_METRIC_EXPORT_INTERVAL``, then 60).
    metric_interval: float | None = Field(default=None, gt=0)


@dataclass(frozen=True, slots=True)
class ResolvedTelemetry:
    """What the hub sets up: endpoints are full signal URLs, or None for the exporter's
    own ``OTEL_*`` resolution."""

    traces_endpoint: str | None
    metrics_endpoint: str | None
    service_name: str
    sample_ratio: float
    metrics: bool
    metric_interval_seconds: float
    #: Where spans go, for the one log line an unreachable collector gets (no credentials).
    label: str


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value not in (None, "") else default
    except ValueError:
        return default


def resolve(config: TelemetryConfig, env: Mapping[str, str] | None = None) -> ResolvedTelemetry | None:
    """The telemetry to set up, or None when it is off."""
    env = os.environ if env is None else env
    if config.enabled is False or _truthy(env.get("OTEL_SDK_DISABLED")):
        return None
    base = config.otlp_endpoint
    env_traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or None
    env_base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
    if base is None and env_traces is None and env_base is None and config.enabled is not True:
        return None
    traces = metrics = None
    if base is not None:
        root = base.rstrip("/")
        traces, metrics = f"{root}/v1/traces", f"{root}/v1/metrics"
    ratio = config.sample_ratio
    if ratio is None:
        ratio = min(max(_float(env.get("OTEL_TRACES_SAMPLER_ARG"), 1.0), 0.0), 1.0)
    interval = config.metric_interval
    if interval is None:
        interval = _float(env.get("OTEL_METRIC_EXPORT_INTERVAL"), 60_000.0) / 1000.0
    service = config.service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
    label = (traces or env_traces or (f"{env_base.rstrip('/')}/v1/traces" if env_base else None)
             or "http://localhost:4318/v1/traces")
    return ResolvedTelemetry(
        traces_endpoint=traces, metrics_endpoint=metrics, service_name=service,
        sample_ratio=ratio, metrics=config.metrics, metric_interval_seconds=interval,
        label=_strip_credentials(label),
    )


def _strip_credentials(url: str) -> str:
    """``scheme://host:port/path`` without userinfo or query (no secrets in logs)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"
