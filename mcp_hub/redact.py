"""Keep secrets out of every output: logs, errors, status, metrics.

Two sources of secrets: values that *look* like one (bearer tokens, ``sk-…``,
``ghp_…``, ``token=…``/``password=…`` assignments, URL credentials) and the
exact values that were interpolated from the environment into the config
(``${GITHUB_TOKEN}``), which may look like anything. :func:`redact` replaces
both with ``[REDACTED]``. The process-wide set of known values is filled by the
hub when it loads its config; :class:`RedactingFilter` applies the same to
every log record.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable

__all__ = ["REDACTED", "RedactingFilter", "add_secrets", "known_secrets", "redact"]

REDACTED = "[REDACTED]"

# A key that names a secret: ``token``, ``api_key``, ``client_secret``, ``auth``, …
_KEY = (r"(?i)\b((?:[a-z0-9]+[_-])*(?:api[_-]?)?"
        r"(?:token|key|secret|password|passwd|pwd|auth|credential)s?)")

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + REDACTED),
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{8,}"), REDACTED),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{10,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), REDACTED),
    # ``token=…``: an assignment's value is always a secret.
    (re.compile(_KEY + r"(\s*=\s*)(\"?)[^\s\"'&,;]{3,}"), r"\1\2\3" + REDACTED),
    # ``token: …``: only a value that looks like a credential (a digit or symbol, or long),
    # so the hub's own words after a key path stay readable ("servers.c.auth: unknown key").
    (re.compile(_KEY + r"(\s*:\s*)(\"?)(?=[^\s\"'&,;]*[0-9+/=.~-]|[^\s\"'&,;]{16,})"
                r"[^\s\"'&,;]{3,}"), r"\1\2\3" + REDACTED),
    (re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"), r"\1" + REDACTED + "@"),
]

_lock = threading.Lock()
_known: frozenset[str] = frozenset()
_known_re: re.Pattern[str] | None = None


def add_secrets(values: Iterable[str]) -> None:
    """Remember exact secret values (at least 4 characters) to redact everywhere."""
    global _known, _known_re
    with _lock:
        merged = set(_known)
        merged.update(v for v in values if v and len(v) >= 4)
        _known = frozenset(merged)
        if _known:
            # Longest first so a secret containing another is replaced whole.
            alternatives = sorted(_known, key=len, reverse=True)
            _known_re = re.compile("|".join(re.escape(v) for v in alternatives))
        else:
            _known_re = None


def known_secrets() -> frozenset[str]:
    """The exact values registered with :func:`add_secrets`."""
    return _known


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Return ``text`` with every secret-looking value and known secret replaced."""
    if not text:
        return text
    known_re = _known_re
    if known_re is not None:
        text = known_re.sub(REDACTED, text)
    for value in extra:
        if value and len(value) >= 4:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that redacts the fully formatted message of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to logging to report
            return True
        cleaned = redact(message)
        if cleaned != message or record.args:
            record.msg = cleaned
            record.args = None
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
