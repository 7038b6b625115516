"""OpenTelemetry traces, metrics and log correlation for the hub's tool calls.

Off unless ``[telemetry]`` or the ``OTEL_*`` variables name an OTLP endpoint
(:mod:`mcp_hub.telemetry.settings`), and then it needs the ``otel`` extra
(``pip install 'mcp-hub[otel]'``: the OpenTelemetry SDK and OTLP/HTTP
exporter). The spans and metrics are described in docs/observability.md.

This package imports nothing of the hub: the hub, the pipeline and the
upstream connections all use it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from mcp_hub.telemetry.settings import ResolvedTelemetry, TelemetryConfig, resolve
from mcp_hub.telemetry.spans import (
    OFF,
    CallSpan,
    Telemetry,
    TelemetryOff,
    client_span,
    inject_trace_headers,
    progress_event,
    relay_span,
)

__all__ = [
    "OFF",
    "CallSpan",
    "ResolvedTelemetry",
    "Telemetry",
    "TelemetryConfig",
    "TelemetryOff",
    "client_span",
    "inject_trace_headers",
    "progress_event",
    "reconfigure_telemetry",
    "relay_span",
    "resolve",
    "start_telemetry",
    "stop_telemetry",
]

logger = logging.getLogger("mcp_hub.telemetry")


def start_telemetry(config: TelemetryConfig, *, service_version: str,
                    known_tool: Callable[[str], bool]) -> Telemetry | TelemetryOff:
    """Set up telemetry from ``config`` and the environment; :data:`OFF` when it is off.

    A configured endpoint without the OpenTelemetry SDK installed is logged once
    and leaves telemetry off rather than failing the hub.
    """
    settings = resolve(config)
    if settings is None:
        return OFF
    try:
        from mcp_hub.telemetry.providers import build_providers

        providers = build_providers(settings, service_version)
    except ImportError as exc:
        logger.warning("telemetry is configured but the OpenTelemetry SDK is missing (%s); "
                       "install mcp-hub[otel]. Telemetry stays off.", exc.name)
        return OFF
    meter = (providers.meter_provider.get_meter("mcp_hub", service_version)
             if providers.meter_provider is not None else None)
    logger.info("telemetry: traces%s to %s, sample ratio %g", " and metrics" if meter else "",
                settings.label, settings.sample_ratio)
    return Telemetry(providers.sampler, meter, known_tool, providers=providers)


async def stop_telemetry(telemetry: Telemetry | TelemetryOff, *, grace: float = 5.0) -> None:
    """Flush what is buffered and stop the exporters, waiting at most ``grace`` seconds
    (an unreachable collector must not hold the hub's exit)."""
    if not telemetry.enabled:
        return
    with anyio.move_on_after(grace, shield=True):
        await anyio.to_thread.run_sync(telemetry.shutdown, abandon_on_cancel=True)


def reconfigure_telemetry(current: Telemetry | TelemetryOff, old: TelemetryConfig,
                          new: TelemetryConfig, *, service_version: str,
                          known_tool: Callable[[str], bool]
                          ) -> tuple[Telemetry | TelemetryOff, Telemetry | TelemetryOff | None]:
    """A config reload: ``(telemetry to use, telemetry to stop or None)``.

    An unchanged ``[telemetry]`` keeps ``current``. A changed one starts anew (new
    endpoint, sampling, service name, or on/off) and hands back the old one, for the
    caller to flush and stop in the background (:func:`stop_telemetry`): requests
    that start after the reload use the new settings, those in flight finish on the
    old ones. The ``OTEL_*`` variables are read again only when ``[telemetry]`` changes.
    """
    if old == new:
        return current, None
    replacement = start_telemetry(new, service_version=service_version, known_tool=known_tool)
    logger.info("telemetry: [telemetry] changed on reload; %s",
                "applied" if replacement.enabled else "telemetry is now off")
    return replacement, current if current.enabled else None
