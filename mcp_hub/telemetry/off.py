"""Telemetry off: one shared no-op span, so the call path pays two method calls."""

from __future__ import annotations

from typing import Any

__all__ = ["NOOP", "OFF", "TelemetryOff"]


class _Noop:
    """The span of a request when telemetry is off: every method does nothing."""

    __slots__ = ()

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def done(self, result: Any) -> None:
        return None

    def tool(self, upstream: str | None) -> None:
        return None


NOOP = _Noop()


class TelemetryOff:
    """Telemetry not configured (or not installed)."""

    enabled = False

    def serve(self, name: str, call: Any) -> _Noop:
        return NOOP

    def request(self, method: str, target: str | None, call: Any = None, **info: Any) -> _Noop:
        return NOOP

    def shutdown(self) -> None:
        return None


OFF = TelemetryOff()
