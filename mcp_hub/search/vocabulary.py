"""Words for tool search: tokenising, stemming, stop words and general synonyms.

The synonym groups are general English and software vocabulary (CRUD verbs,
common abbreviations): a request says "make", "remove" or "repo" where a tool
definition says "create", "delete" or "repository". They are deliberately not
tied to any particular server's tools.
"""

from __future__ import annotations

import re
from functools import lru_cache

import snowballstemmer

__all__ = ["STOP_WORDS", "abbreviation", "expansions", "name_tokens", "name_words", "stem", "tokenize"]

# Splits identifiers and prose alike: runs of letters/digits, with camelCase and
# acronym boundaries ("getHTTPResponse" -> get, HTTP, Response).
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

_STOP_TEXT = """
    a about after all also am an and any are as at be been before being but by can could
    did do does doing for from had has have having he her here hers him his how i if in
    into is it its itself just me my myself no nor not of off on once only or other our
    ours out over own please same she should so some such than that the their theirs them
    then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours e g eg ie etc
    via using use used uses want need let like tell give me i'm it's thing things
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())

_stemmer = snowballstemmer.stemmer("english")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Snowball (Porter 2) stem of a lower-case word."""
    return str(_stemmer.stemWord(word))


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tokenize(text: str) -> list[str]:
    """Stemmed content words of ``text``: no stop words, digits or single letters."""
    return [stem(w) for w in _words(text) if len(w) > 1 and not w.isdigit() and w not in STOP_WORDS]


def name_words(name: str) -> list[str]:
    """Lower-case parts of an identifier, split on ``_ - . :`` and camelCase."""
    return [w for w in _words(name) if not w.isdigit() and w not in {"a", "an", "the"}]


def name_tokens(name: str) -> list[str]:
    """Stemmed parts of an identifier (see :func:`name_words`)."""
    return [stem(w) for w in name_words(name)]


# Each group: words that requests and tool definitions use for the same idea.
_GROUPS: tuple[tuple[str, ...], ...] = (
    # verbs
    ("create", "make", "new", "add", "generate", "insert"),
    ("delete", "remove", "erase", "drop", "destroy", "purge", "discard", "forget"),
    ("search", "find", "look", "lookup", "locate", "query", "seek"),
    ("get", "fetch", "retrieve", "read", "obtain", "load", "show", "view", "display"),
    ("list", "enumerate", "show", "browse"),
    ("update", "edit", "modify", "change", "alter", "patch", "set", "replace"),
    ("write", "save", "store", "put", "persist", "record"),
    ("run", "execute", "exec", "invoke", "launch", "trigger", "start"),
    ("stop", "end", "halt", "cancel", "terminate", "kill"),
    ("send", "post", "publish", "share"),
    ("reply", "respond", "answer"),
    ("comment", "note", "remark"),
    ("move", "rename", "relocate"),
    ("copy", "duplicate", "clone"),
    ("close", "quit", "exit", "shut"),
    ("navigate", "go", "visit", "goto"),
    ("click", "press", "tap"),
    ("type", "enter", "input", "fill"),
    ("wait", "pause", "sleep"),
    ("upload", "attach"),
    ("download", "export"),
    ("connect", "login", "attach"),
    ("convert", "translate", "transform"),
    ("compare", "diff", "difference", "changes"),
    ("describe", "explain", "detail", "details", "info", "information", "inspect"),
    ("count", "number", "tally", "total"),
    ("sum", "add", "plus", "total"),
    ("restart", "rerun", "retry", "redo"),
    ("check", "verify", "validate", "test"),
    ("summarize", "summary", "overview"),
    # nouns
    ("repository", "project"),
    ("directory", "folder"),
    ("file", "document"),
    ("table", "collection"),
    ("image", "picture", "photo"),
    ("page", "website", "site", "webpage", "web", "url", "link"),
    ("tab", "page", "window"),
    ("issue", "ticket", "bug"),
    ("user", "person", "people", "member", "account", "profile"),
    ("channel", "room", "conversation"),
    ("message", "text", "post"),
    ("relation", "relationship", "link", "connection", "edge"),
    ("entity", "node", "object", "item"),
    ("observation", "fact", "note"),
    ("configuration", "settings", "setting"),
    ("parameter", "argument"),
    ("kubernetes", "kubectl", "cluster"),
    ("container", "pod"),
    ("log", "logs", "output"),
    ("history", "log", "recent"),
    ("error", "failure", "fail", "failed", "problem"),
    ("statistics", "stats", "stat", "metrics"),
    ("size", "dimension", "dimensions", "length"),
    ("place", "location", "address", "venue", "nearby", "near"),
    ("coordinates", "latitude", "longitude", "geocode"),
    ("route", "directions", "way", "path"),
    ("altitude", "elevation", "height"),
    ("distance", "far", "travel"),
    ("time", "clock", "hour", "date"),
    ("timezone", "zone"),
    ("documentation", "manual", "reference"),
    ("library", "package", "framework", "module"),
    ("screenshot", "capture", "snapshot"),
    ("video", "screencast", "recording"),
    ("dialog", "alert", "popup", "prompt", "modal"),
    ("dropdown", "select", "option", "choose", "pick"),
    ("reaction", "emoji", "react"),
    ("stage", "staged", "index"),
    ("branch", "checkout", "switch"),
    ("think", "reason", "reasoning", "thought", "step"),
    ("research", "investigate", "study"),
    ("paper", "article", "publication", "arxiv"),
    ("internet", "web", "online"),
    ("performance", "speed", "slow", "fast", "profile"),
    ("memory", "heap", "ram", "remember", "knowledge"),
    ("javascript", "script", "code"),
    ("keyboard", "key", "keystroke"),
    ("form", "field", "fields"),
    ("tree", "hierarchy", "structure", "recursive", "recursively"),
)


# Abbreviations: the query word stands for these words exactly (full weight).
_ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    "pr": ("pull", "request"),
    "prs": ("pull", "request"),
    "mr": ("merge", "request"),
    "repo": ("repository",),
    "repos": ("repository",),
    "dir": ("directory",),
    "db": ("database",),
    "k8s": ("kubernetes",),
    "kube": ("kubernetes",),
    "js": ("javascript",),
    "env": ("environment",),
    "config": ("configuration",),
    "info": ("information",),
    "img": ("image",),
    "msg": ("message",),
    "doc": ("document",),
    "docs": ("documentation",),
    "param": ("parameter",),
    "params": ("parameter",),
    "arg": ("argument",),
    "args": ("argument",),
    "var": ("variable",),
    "vars": ("variable",),
    "tz": ("timezone",),
}


def _build_synonyms() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in _GROUPS:
        stems = {stem(w) for w in group}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {k: frozenset(v) for k, v in table.items()}


_SYNONYMS = _build_synonyms()
_ABBREVIATED = {stem(k): tuple(stem(w) for w in v) for k, v in _ABBREVIATIONS.items()}


def expansions(term: str) -> frozenset[str]:
    """Stems related to the stem ``term`` (without ``term`` itself)."""
    return _SYNONYMS.get(term, frozenset())


def abbreviation(term: str) -> tuple[str, ...]:
    """Stems that the abbreviation ``term`` stands for (``pr`` -> pull, request)."""
    return _ABBREVIATED.get(term, ())
