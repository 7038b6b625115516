"""Add, replace or remove one entry of a JSON config file, leaving every other byte alone.

Client config files are the user's: they hold other servers, settings, their own
indentation, maybe comments (VS Code reads JSON with comments). Parsing them and
writing ``json.dumps`` back would reformat the whole file. Instead this module
parses the text once, remembering where every object member starts and ends,
and edits only the span of the one member it changes:

* a new member goes after the container's last member, on its own line with the
  indentation of its siblings (or inline, in the file's separators, when the
  object is written on one line); its value is indented like the rest of the file;
* a replaced member keeps its key and position, only its value text changes;
* a removed member takes the comma and line break before it along — the exact
  inverse of adding it. A container left empty is removed too, so install then
  uninstall gives back the original bytes.

Limits: comments between two members may go with a removed member; line endings
(``\\n`` or ``\\r\\n``) and a UTF-8 byte-order mark are kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any

from mcp_hub.errors import HubError

__all__ = ["JsonEditError", "get_member", "parse", "remove_member", "set_member"]

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsonEditError(HubError, ValueError):
    """The text is not valid JSON (or JSON with comments), or not shaped as expected."""


@dataclass
class Member:
    """One ``"key": value`` of an object, by character offsets into the text."""

    key: str
    key_start: int
    value_start: int
    value_end: int
    value: Any
    obj: ObjectSpan | None = None


@dataclass
class ObjectSpan:
    """An object: ``start`` is its ``{``, ``end`` is just after its ``}``."""

    start: int
    end: int
    members: list[Member] = field(default_factory=list)

    def find(self, key: str) -> Member | None:
        """The member named ``key`` (the last one, as JSON parsers keep)."""
        for member in reversed(self.members):
            if member.key == key:
                return member
        return None


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.pos = 0

    def fail(self, msg: str, pos: int | None = None) -> JsonEditError:
        at = self.pos if pos is None else pos
        if at >= len(self.text) and msg.startswith("expected"):
            msg = f"unexpected end of file ({msg})"
        line = self.text.count("\n", 0, at) + 1
        col = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return JsonEditError(f"invalid JSON at line {line}, column {col}: {msg}")

    def skip(self) -> None:
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif self.comments and text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif self.comments and text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("unterminated comment")
                self.pos = end + 2
            else:
                return

    def value(self) -> tuple[Any, ObjectSpan | None]:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("unexpected end of file")
        c = self.text[self.pos]
        if c == "{":
            return self.object()
        if c == "[":
            return self.array(), None
        if c == '"':
            return self.string(), None
        for word, val in _LITERALS.items():
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return val, None
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"unexpected character {c!r}")
        self.pos = match.end()
        return json.loads(match.group()), None

    def string(self) -> str:
        try:
            value, self.pos = scanstring(self.text, self.pos + 1, True)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None
        return str(value)

    def array(self) -> list[Any]:
        self.pos += 1
        out: list[Any] = []
        while True:
            self.skip()
            if self.text.startswith("]", self.pos):
                self.pos += 1
                return out
            out.append(self.value()[0])
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith("]", self.pos) and not self.comments:
                    raise self.fail("trailing comma")
            elif not self.text.startswith("]", self.pos):
                raise self.fail("expected ',' or ']'")

    def object(self) -> tuple[dict[str, Any], ObjectSpan]:
        span = ObjectSpan(self.pos, -1)
        self.pos += 1
        out: dict[str, Any] = {}
        while True:
            self.skip()
            if self.text.startswith("}", self.pos):
                self.pos += 1
                span.end = self.pos
                return out, span
            if not self.text.startswith('"', self.pos):
                raise self.fail("expected a property name in double quotes")
            key_start = self.pos
            key = self.string()
            self.skip()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            self.skip()
            value_start = self.pos
            value, obj = self.value()
            span.members.append(Member(key, key_start, value_start, self.pos, value, obj))
            out[key] = value
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith("}", self.pos) and not self.comments:
                    raise self.fail("trailing comma")
            elif not self.text.startswith("}", self.pos):
                raise self.fail("expected ',' or '}'")


def parse(text: str, *, comments: bool = False) -> tuple[Any, ObjectSpan | None]:
    """Parse ``text`` (JSON, or JSON with comments and trailing commas when ``comments``)."""
    parser = _Parser(text, comments)
    try:
        value, span = parser.value()
    except RecursionError:
        raise JsonEditError("invalid JSON: nested too deeply") from None
    parser.skip()
    if parser.pos != len(text):
        raise parser.fail("extra data after the JSON value")
    return value, span


# ── layout ───────────────────────────────────────────────────────────────────


@dataclass
class _Layout:
    newline: str
    unit: str
    item_sep: str
    key_sep: str


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    prefix = text[start:pos]
    return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]


def _layout(text: str, root: ObjectSpan) -> _Layout:
    newline = "\r\n" if "\r\n" in text else "\n"
    unit = "  "
    for member in root.members:
        if "\n" in text[root.start:member.key_start]:
            unit = _line_indent(text, member.key_start) or "  "
            break
    compact = '":' in text and '": ' not in text
    return _Layout(newline, unit, "," if compact else ", ", ":" if compact else ": ")


def _dump(value: Any, layout: _Layout, indent: str, multiline: bool) -> str:
    if not multiline:
        return json.dumps(value, ensure_ascii=False,
                          separators=(layout.item_sep, layout.key_sep))
    text = json.dumps(value, ensure_ascii=False, indent=layout.unit)
    return text.replace("\n", layout.newline + indent)


def _insert(text: str, obj: ObjectSpan, key: str, value: Any, layout: _Layout) -> str:
    """``text`` with ``"key": value`` added as the last member of ``obj``."""
    key_json = json.dumps(key, ensure_ascii=False)
    obj_indent = _line_indent(text, obj.start)
    if obj.members:
        last = obj.members[-1]
        multiline = "\n" in text[obj.start:last.key_start]
        indent = _line_indent(text, last.key_start) if multiline else ""
        member = f"{key_json}{layout.key_sep}{_dump(value, layout, indent, multiline)}"
        lead = f",{layout.newline}{indent}" if multiline else layout.item_sep
        return text[:last.value_end] + lead + member + text[last.value_end:]
    indent = obj_indent + layout.unit
    member = f"{key_json}{layout.key_sep}{_dump(value, layout, indent, True)}"
    interior = text[obj.start + 1:obj.end - 1]
    tail = interior if interior.strip() else layout.newline + obj_indent
    return (text[:obj.start + 1] + layout.newline + indent + member + tail + text[obj.end - 1:])


def _between(text: str, obj: ObjectSpan) -> str:
    """What ``obj`` holds besides its members: whitespace, commas and comments."""
    parts, at = [], obj.start + 1
    for member in obj.members:
        parts.append(text[at:member.key_start])
        at = member.value_end
    parts.append(text[at:obj.end - 1])
    return "".join(parts)


def _remove(text: str, obj: ObjectSpan, member: Member) -> str:
    i = obj.members.index(member)
    if len(obj.members) > 1:
        if i > 0:
            return text[:obj.members[i - 1].value_end] + text[member.value_end:]
        return text[:member.key_start] + text[obj.members[1].key_start:]
    if "/" not in _between(text, obj):
        return text[:obj.start + 1] + text[obj.end - 1:]
    end = member.value_end
    rest = text[end:obj.end - 1]
    if rest.lstrip(" \t").startswith(","):
        end += rest.index(",") + 1
    return text[:member.key_start] + text[end:]


def _root(text: str, comments: bool) -> ObjectSpan:
    value, span = parse(text, comments=comments)
    if span is None or not isinstance(value, dict):
        raise JsonEditError("the top level is not a JSON object")
    return span


def _container(root: ObjectSpan, container: str) -> Member | None:
    member = root.find(container)
    if member is not None and member.obj is None:
        raise JsonEditError(f"'{container}' is not a JSON object")
    return member


def get_member(text: str, container: str, key: str, *, comments: bool = False) -> Any:
    """The value of ``container.key`` in ``text``, or None when there is none."""
    holder = _container(_root(text, comments), container)
    assert holder is None or holder.obj is not None
    member = holder.obj.find(key) if holder is not None and holder.obj is not None else None
    return None if member is None else member.value


def set_member(text: str, container: str, key: str, value: Any, *, comments: bool = False) -> str:
    """``text`` with ``container.key`` set to ``value`` (added, or its value replaced)."""
    root = _root(text, comments)
    layout = _layout(text, root)
    holder = _container(root, container)
    if holder is None:
        return _insert(text, root, container, {key: value}, layout)
    assert holder.obj is not None
    member = holder.obj.find(key)
    if member is None:
        return _insert(text, holder.obj, key, value, layout)
    multiline = "\n" in text[holder.obj.start:member.key_start]
    indent = _line_indent(text, member.key_start) if multiline else ""
    new = _dump(value, layout, indent, multiline)
    return text[:member.value_start] + new + text[member.value_end:]


def remove_member(text: str, container: str, key: str, *, comments: bool = False) -> str | None:
    """``text`` without ``container.key`` (and without the container if that empties it);
    None when there is no such member."""
    root = _root(text, comments)
    holder = _container(root, container)
    if holder is None or holder.obj is None:
        return None
    member = holder.obj.find(key)
    if member is None:
        return None
    if len(holder.obj.members) == 1 and "/" not in _between(text, holder.obj):
        return _remove(text, root, holder)
    return _remove(text, holder.obj, member)
