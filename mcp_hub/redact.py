"""Keep secrets out of every output: logs, errors, status, metrics.

Two sources of secrets: values that *look* like one (bearer tokens, ``sk-…``,
``ghp_…``, ``token=…``/``password=…`` assignments, URL credentials) and the
exact values that were interpolated from the environment into the config
(``${GITHUB_TOKEN}``), which may look like anything. :func:`redact` replaces
both with ``[REDACTED]``. Each Hub keeps its own :class:`Secrets` (filled from
its config, dropped when it closes); a CLI command outside any Hub adds to the
process's own set. :func:`redact` and :class:`RedactingFilter` (logging is
process-wide by nature) replace the values of every set open now: one Hub's
output may so hide another's secret too, which only ever hides more.

The hub's own hints may look like a secret to the patterns (``${GITHUB_TOKEN:-default}``,
``auth = "oauth"``). The code that writes such a fragment marks it with :func:`own`; the
patterns leave a marked fragment alone where it stands as a word of its own, so the hint
reaches the user whole. Exact known secret values are replaced first, marked or not, and
a fragment glued to other text (``token=x${A:-default}``) is not protected.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Iterable

__all__ = ["REDACTED", "RedactingFilter", "Secrets", "add_secrets", "add_transient", "attach",
           "detach", "known_secrets", "own", "redact"]

REDACTED = "[REDACTED]"

# A key that names a secret: ``token``, ``api_key``, ``client_secret``, ``auth``, …
_KEY = (r"(?i)\b((?:[a-z0-9]+[_-])*(?:api[_-]?)?"
        r"(?:token|key|secret|password|passwd|pwd|auth|credential)s?)")

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)\b(bearer|basic|dpop)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + REDACTED),
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

#: The hub's own fragments the patterns must not cut (see :func:`own`); bounded.
_OWN_MAX = 512
_own: dict[str, None] = {}
_own_re: re.Pattern[str] | None = None
_own_lock = threading.Lock()
# A marked fragment is protected only where it stands alone: after the start, a space or an
# opening bracket or quote, and before the end, a space, a closing bracket or punctuation.
_OWN_BEFORE = r"(?<![^\s(\[{\"'`])"
_OWN_AFTER = r"(?![^\s)\]}\"'`.,;:!?])"


def own(fragment: str) -> str:
    """Mark ``fragment`` as the hub's own words (a hint it wrote, no value); returns it.

    Only for text the hub composed from its own words and names (a variable's or a
    key's name), never for a value read from the environment, a file or a peer.
    """
    global _own_re
    if not fragment:
        return fragment
    with _own_lock:
        if fragment not in _own:
            if len(_own) >= _OWN_MAX:
                _own.pop(next(iter(_own)))
            _own[fragment] = None
            alternatives = sorted(_own, key=len, reverse=True)
            _own_re = re.compile(_OWN_BEFORE + "(?:" + "|".join(map(re.escape, alternatives))
                                 + ")" + _OWN_AFTER)
    return fragment


def _apply_patterns(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _patterns_outside_own(text: str) -> str:
    """The patterns applied to every part of ``text`` but the hub's own fragments."""
    marked = _own_re
    if marked is None:
        return _apply_patterns(text)
    parts: list[str] = []
    start = 0
    for match in marked.finditer(text):
        parts.append(_apply_patterns(text[start:match.start()]))
        parts.append(match.group(0))
        start = match.end()
    parts.append(_apply_patterns(text[start:]))
    return "".join(parts)


class Secrets:
    """A set of exact secret values and the pattern that finds them; one per Hub.

    Values shorter than 4 characters are ignored (they would redact ordinary words).
    """

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._values: frozenset[str] = frozenset()
        self._re: re.Pattern[str] | None = None
        self.add(values)

    @property
    def values(self) -> frozenset[str]:
        """The exact values known."""
        return self._values

    def add(self, values: Iterable[str]) -> None:
        """Remember more exact values."""
        with self._lock:
            merged = self._values | {v for v in values if v and len(v) >= 4}
            if merged == self._values:
                return
            # Longest first so a secret containing another is replaced whole.
            alternatives = sorted(merged, key=len, reverse=True)
            self._re = re.compile("|".join(re.escape(v) for v in alternatives))
            self._values = frozenset(merged)

    def sub(self, text: str) -> str:
        """``text`` with every known value replaced (patterns not applied)."""
        pattern = self._re
        return text if pattern is None else pattern.sub(REDACTED, text)


# Secrets known to this process outside any Hub (a CLI command's config), and the sets
# of the Hubs open now. The module-level redact() and the log filter use all of them:
# redacting another Hub's secret only hides more, and a closed Hub's set is dropped.
_process = Secrets()
_live: weakref.WeakSet[Secrets] = weakref.WeakSet()
_live_lock = threading.Lock()


def attach(secrets: Secrets) -> None:
    """Make a Hub's set known to :func:`redact` and the log filter while it is open."""
    with _live_lock:
        _live.add(secrets)


def detach(secrets: Secrets) -> None:
    """Forget a Hub's set (the Hub closed)."""
    with _live_lock:
        _live.discard(secrets)


def add_secrets(values: Iterable[str]) -> None:
    """Remember exact secret values of this process (a CLI command outside any Hub)."""
    _process.add(values)


#: Short-lived secrets obtained at run time (tokens exchanged for an upstream, which may be
#: opaque): the newest ones are replaced like the others, older ones have expired.
_TRANSIENT_MAX = 256
_transient_values: dict[str, None] = {}
_transient = Secrets()
_transient_lock = threading.Lock()


def add_transient(value: str) -> None:
    """Remember one short-lived secret (bounded: the oldest is forgotten first)."""
    global _transient
    with _transient_lock:
        if not value or value in _transient_values:
            return
        _transient_values[value] = None
        while len(_transient_values) > _TRANSIENT_MAX:
            del _transient_values[next(iter(_transient_values))]
        _transient = Secrets(_transient_values)


def known_secrets() -> frozenset[str]:
    """Every exact value :func:`redact` replaces now (the process's and open Hubs')."""
    with _live_lock:
        sets = [_process, *_live]
    return frozenset().union(*(s.values for s in sets))


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """Return ``text`` with every secret-looking value and known secret replaced."""
    if not text:
        return text
    text = _transient.sub(_process.sub(text))
    if _live:
        with _live_lock:
            sets = list(_live)
        for secrets in sets:
            text = secrets.sub(text)
    for value in extra:
        if value and len(value) >= 4:
            text = text.replace(value, REDACTED)
    return _patterns_outside_own(text)


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
