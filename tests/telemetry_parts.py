"""What the telemetry tests share: the OTLP/HTTP receiver, the trace fixture's
``[servers.trace]`` block, a ``[telemetry]`` table that exports to the receiver, and
fast export from the hub's OpenTelemetry SDK.

Importing this module skips the importing test module when the ``otel`` extra is not
installed (outside CI; under ``CI=true`` the import error stands).
"""

from __future__ import annotations

import os

import pytest

from tests.hubtest import PY, ROOT

try:
    import opentelemetry.sdk  # noqa: F401  (the hub's side of the tests)

    from tests.otlp_receiver import Received, Span, otlp_receiver
except ImportError as exc:  # pragma: no cover - depends on the environment
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"needs the otel extra (pip install -e '.[dev]'): {exc}", allow_module_level=True)

__all__ = ["CLIENT", "SERVER", "Received", "Span", "fast_export", "otlp_receiver",
           "telemetry_toml", "trace_server_toml"]

SERVER, CLIENT = 2, 3  # OTLP span kinds


def fast_export(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans leave the batch processor every 50 ms instead of every 5 s, and no
    ``OTEL_*`` setting of the environment reaches the hub."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER_ARG"):
        monkeypatch.delenv(name, raising=False)


def trace_server_toml() -> str:
    """``[servers.trace]``: the trace fixture over stdio, its names unprefixed."""
    return (f'[servers.trace]\ncommand = "{PY}"\nargs = ["-m", "tests.fixtures.trace_server"]\n'
            f'cwd = "{ROOT}"\nprefix = ""\n')


def telemetry_toml(endpoint: str) -> str:
    """``[telemetry]`` exporting to ``endpoint``, metrics every 0.2 s."""
    return f'\n[telemetry]\notlp_endpoint = "{endpoint}"\nmetric_interval = 0.2\n'
