"""Upstream tool descriptions, made safe to show a model.

A tool description goes straight into the model's context, so an upstream that
controls one controls part of the prompt. Two defences live here:

* :func:`clean_description` removes what a person reviewing the tool cannot see
  but a model reads: Unicode tag characters (U+E0000–U+E007F, "ASCII
  smuggling"), zero-width and bidirectional controls, variation selectors of the
  supplement block (byte smuggling), invisible fillers, and every other control
  or format character except ``\\n`` and ``\\t``.
* :func:`injection_findings` flags descriptions that carry instructions aimed
  at the model rather than documentation of the tool: overriding earlier
  instructions, hiding things from the user, ``<IMPORTANT>``-style hidden
  directives, pointers to credentials (``~/.ssh``, ``.aws/credentials``),
  sending secrets or the conversation somewhere, redefining other tools'
  behaviour, and role or system-prompt hijacks. Addressing the model as such
  ("Note to LLM: use the indexes tool first") is normal in real catalogs and is
  not flagged; what is flagged is the intent to override, hide or exfiltrate.
  The text is normalised first
  (NFKC, invisible characters removed, tag characters decoded, whitespace
  collapsed), so full-width letters or a payload hidden in tag characters are
  caught too. Findings are reported, not acted on: the hub shows them in
  ``hub_status``; an operator decides.

The patterns are general (families of phrasing seen in published tool-poisoning
attacks), tuned to raise nothing on the real catalogs of popular MCP servers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

__all__ = [
    "PATTERNS",
    "clean_description",
    "clean_tool_definition",
    "hidden_characters",
    "injection_findings",
    "tool_findings",
]

_TAG_START, _TAG_END = 0xE0000, 0xE007F
# Characters that render as nothing (or as a blank) but are letters or marks, so the
# category test below does not catch them.
_INVISIBLE_EXTRA = frozenset(
    [0x115F, 0x1160, 0x3164, 0xFFA0,  # Hangul fillers
     0x034F,  # combining grapheme joiner
     0x180E,  # Mongolian vowel separator
     0x2800,  # Braille blank
     *range(0xE0100, 0xE01F0)]  # variation selectors supplement
)
_LINE_BREAKS = {"\u2028": "\n", "\u2029": "\n", "\r\n": "\n", "\r": "\n"}
_LINE_BREAK_RE = re.compile("\r\n|[\r\u2028\u2029]")


def _invisible(ch: str) -> bool:
    if ch in "\n\t":
        return False
    code = ord(ch)
    if _TAG_START <= code <= _TAG_END or code in _INVISIBLE_EXTRA:
        return True
    # Cc controls, Cf format (zero-width, bidi, soft hyphen, tags), Cs surrogates,
    # Co private use: none is meant to be read by a person in a tool description.
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co")


def hidden_characters(text: str) -> int:
    """How many characters :func:`clean_description` would remove from ``text``."""
    text = _LINE_BREAK_RE.sub("\n", text)
    return sum(1 for ch in text if _invisible(ch))


def clean_description(text: str) -> str:
    """``text`` without invisible and control characters (``\\n`` and ``\\t`` are kept).

    Line and paragraph separators and carriage returns become ``\\n``; everything
    else visible is returned unchanged (no normalisation of letters).
    """
    if not text:
        return ""
    text = _LINE_BREAK_RE.sub(lambda m: _LINE_BREAKS[m.group(0)], text)
    if text.isascii() and text.isprintable():
        return text
    return "".join(ch for ch in text if not _invisible(ch))


def _decode_tags(text: str) -> str:
    """The ASCII message hidden in tag characters (U+E0020–U+E007E map to ASCII)."""
    return "".join(chr(ord(ch) - _TAG_START) for ch in text
                   if _TAG_START + 0x20 <= ord(ch) <= _TAG_START + 0x7E)


# Each pattern: (label, compiled regex). They run on normalised, lower-cased text
# with whitespace collapsed to single spaces. ``.{0,N}`` windows keep each
# match local to one sentence-sized span.
_SENSITIVE_PATHS = (
    r"(?:~|\$home|/home/[\w.-]+|/users/[\w.-]+|/root)?/?\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b"
    r"|\.aws/credentials|\.kube/config|\.docker/config\.json|\.netrc\b|\.npmrc\b|\.pypirc\b"
    r"|\.git-credentials|\.config/gcloud|/etc/(?:passwd|shadow|sudoers)\b"
    r"|\bmcp\.json\b|claude_desktop_config\.json|\.cursor/|\.env\b(?!ironment)"
)
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("overrides earlier instructions", re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}?\b(?:previous|prior|above|earlier"
        r"|preceding|all|any|other|system|your|the user'?s?)\b.{0,30}?\b(?:instructions?|prompts?"
        r"|rules|directions|directives|guidelines|guardrails|policies)\b")),
    ("hides actions from the user", re.compile(
        r"\b(?:do not|don'?t|never|must not|should not|without)\s+(?:\w+\s+){0,2}?(?:tell|telling"
        r"|inform|informing|mention|mentioning|reveal|revealing|notify|notifying|alert|alerting"
        r"|show|showing|disclose|disclosing|let)\b.{0,30}?\b(?:the user|users?|the human|anyone"
        r"|them)\b"
        r"|\b(?:keep|hide)\b.{0,20}?\b(?:secret|hidden|confidential)\b.{0,20}?\bfrom\b.{0,10}?"
        r"\b(?:the user|users?|the human)\b"
        r"|\b(?:the user|users?) (?:must|should|need) not (?:know|see|notice|be told)\b"
        r"|\b(?:do not|don'?t|never)\s+(?:mention|reveal|disclose)\s+(?:this|that|it)\b"
        r"|\b(?:silently|secretly|covertly|quietly)\b.{0,30}?\b(?:send|read|call|include|forward"
        r"|copy|upload|pass|add|change|modify|delete)\b")),
    ("hidden directive tag", re.compile(
        r"<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|critical|priority"
        r"|assistant|override)\s*>"
        r"|\[\s*/?\s*(?:system|inst|instructions?)\s*\]|<\|(?:im_start|im_end|system|endoftext)\|>")),
    ("points at credentials or config files", re.compile(
        r"\b(?:read|cat|open|load|include|attach|send|pass|upload|access|fetch|get|copy|print"
        r"|provide|contents? of)\b.{0,80}?(?:" + _SENSITIVE_PATHS + r")")),
    ("sends secrets or the conversation elsewhere", re.compile(
        r"\b(?:send|post|upload|forward|exfiltrate|transmit|leak|bcc|cc|email|append|attach"
        r"|pass|include)\b.{0,60}?\b(?:api[ _-]?keys?|access tokens?|secrets?|passwords?"
        r"|credentials|private keys?|ssh keys?|conversation(?: history)?|chat history"
        r"|previous messages|system prompt)\b.{0,80}?(?:https?://|\b[\w.+-]+@[\w-]+\.[\w.]+\b"
        r"|\bsidenote\b|\bnotes? (?:parameter|field)\b)")),
    ("redefines other tools", re.compile(
        r"\b(?:when|whenever|if|before|after)\b.{0,40}?\b(?:any|every|all|other|another|the)\s+"
        r"(?:other\s+)?tools?\b.{0,30}?\b(?:is|are)\s+(?:called|used|invoked|available)\b.{0,80}?"
        r"\b(?:must|always|instead|first|also)\b"
        r"|\b(?:instead of|rather than) (?:calling|using) (?:the|any) \w+ tool\b"
        r"|\b(?:all|every) (?:emails?|messages?|requests?|payments?|transfers?)\b.{0,40}?"
        r"\b(?:must|should) (?:be )?(?:sent|forwarded|redirected|copied|routed)\b")),
    ("hijacks the model's role", re.compile(
        r"\byou are now\b|\bfrom now on,? you\b|\bnew (?:system )?instructions?\s*:"
        r"|\b(?:reveal|print|output|repeat|show|leak)\b.{0,20}?\b(?:your|the) (?:system prompt"
        r"|hidden instructions|initial instructions)\b"
        r"|\b(?:enter|enable|activate)\b.{0,10}?\b(?:developer|god|jailbreak|dan) mode\b")),
]

_WS_RE = re.compile(r"\s+")
_MAX_EXCERPT = 80


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", clean_description(text))
    return _WS_RE.sub(" ", text).casefold()


def injection_findings(text: str) -> list[str]:
    """Reasons to believe ``text`` instructs the model; empty when it reads like documentation.

    Each finding is ``"<label>: '<excerpt>'"``. A payload hidden in Unicode tag
    characters is decoded and scanned too, and its presence is itself a finding.
    """
    if not text:
        return []
    findings: list[str] = []
    hidden = _decode_tags(text)
    if hidden.strip():
        findings.append(f"hidden text in Unicode tag characters: {_excerpt(hidden)!r}")
    for source in (text, hidden) if hidden.strip() else (text,):
        normal = _normalise(source)
        for label, pattern in PATTERNS:
            match = pattern.search(normal)
            if match is not None:
                finding = f"{label}: {_excerpt(match.group(0))!r}"
                if finding not in findings:
                    findings.append(finding)
    return findings


def _excerpt(text: str) -> str:
    text = _WS_RE.sub(" ", clean_description(text)).strip()
    return text if len(text) <= _MAX_EXCERPT else text[: _MAX_EXCERPT - 1] + "…"


def _texts(value: Any, key: str = "") -> Iterator[str]:
    """Every human-facing string of a definition: descriptions, titles, enum labels."""
    if isinstance(value, str):
        if key in ("description", "title"):
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _texts(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _texts(v, key)


def tool_findings(tool_def: dict[str, Any]) -> list[str]:
    """:func:`injection_findings` over a tool's description and every nested
    description or title (input schema parameters included)."""
    findings: list[str] = []
    for text in _texts(tool_def):
        for finding in injection_findings(text):
            if finding not in findings:
                findings.append(finding)
    return findings


def _clean_nested(value: Any, key: str = "") -> Any:
    if isinstance(value, str):
        return clean_description(value) if key in ("description", "title") else value
    if isinstance(value, dict):
        return {k: _clean_nested(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_nested(v, key) for v in value]
    return value


def clean_tool_definition(tool_def: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``tool_def`` with :func:`clean_description` applied to its description,
    title and every ``description``/``title`` string nested in its schemas."""
    return {k: _clean_nested(v, k) for k, v in tool_def.items()}
