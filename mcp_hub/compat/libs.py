"""Private fields of PyJWT, OpenTelemetry, asyncio and the SDK's request context.

* :func:`jwk_fields`: the JSON fields a ``jwt.PyJWK`` was made from (``alg``,
  ``kty``), which PyJWT keeps only as ``_jwk_data``; the hub checks a key's
  declared algorithm and type against a token's ``alg``;
* :func:`exporter_preferences`: an OTLP metric exporter's temporality and
  aggregation preferences, which a wrapping exporter must repeat;
* :func:`process_transport`: the asyncio transport of an anyio child process,
  closed at once so its pipes are not left to the garbage collector;
* :func:`request_connection`: the SDK connection behind a request context's
  session (stable across one client's requests).
"""

from __future__ import annotations

from typing import Any

__all__ = ["exporter_preferences", "jwk_fields", "process_transport", "request_connection"]


def jwk_fields(key: Any) -> dict[str, Any]:
    """The JWK fields of a ``jwt.PyJWK`` (empty if PyJWT stopped keeping them)."""
    data = getattr(key, "_jwk_data", None)
    return data if isinstance(data, dict) else {}


def exporter_preferences(exporter: Any) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """(preferred temporality, preferred aggregation) of an OTLP metric exporter."""
    temporality = getattr(exporter, "_preferred_temporality", None)
    aggregation = getattr(exporter, "_preferred_aggregation", None)
    return (temporality if isinstance(temporality, dict) else {},
            aggregation if isinstance(aggregation, dict) else {})


def process_transport(process: Any) -> Any:
    """The asyncio subprocess transport behind an anyio ``Process``, or None."""
    return getattr(getattr(process, "_process", None), "_transport", None)


def request_connection(session: Any) -> Any:
    """The connection behind a server request context's session (the session itself
    when the SDK keeps none)."""
    return getattr(session, "_connection", session)
