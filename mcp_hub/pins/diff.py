"""Tool pin fingerprints and diffs: what a pin covers and how a tool changed, in words.

Imports nothing of the project; :mod:`mcp_hub.pins.pinning` (the pin store) builds on it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PIN_FIELDS", "FieldChange", "PinChange", "canonical_json", "diff_fields",
           "fingerprint", "pinned_view"]

PIN_FIELDS = ("name", "description", "inputSchema", "annotations")
_MAX_SHOWN = 160


def pinned_view(raw_name: str, tool_def: Mapping[str, Any]) -> dict[str, Any]:
    """The pinned fields of a tool definition (MCP JSON, camelCase or snake_case keys).

    ``raw_name`` is the upstream's own name, so a changed prefix in ``servers.toml``
    does not look like a changed tool.
    """
    schema = tool_def.get("inputSchema", tool_def.get("input_schema"))
    return {
        "name": raw_name,
        "description": tool_def.get("description") or "",
        "inputSchema": schema if schema is not None else {},
        "annotations": tool_def.get("annotations") or {},
    }


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint(tool_def: Mapping[str, Any], raw_name: str | None = None) -> str:
    """``sha256:<hex>`` of the canonical JSON of the pinned fields of ``tool_def``."""
    name = raw_name if raw_name is not None else str(tool_def.get("name", ""))
    digest = hashlib.sha256(canonical_json(pinned_view(name, tool_def)).encode("utf-8"))
    return "sha256:" + digest.hexdigest()


def _show(text: str) -> str:
    """Text as a person should see it: invisible characters spelled out as escapes."""
    out = []
    for ch in text:
        if ch in "\n\t" or ch.isprintable():
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    shown = "".join(out).replace("\n", "\\n")
    return shown if len(shown) <= _MAX_SHOWN else shown[: _MAX_SHOWN - 1] + "…"


@dataclass(frozen=True, slots=True)
class FieldChange:
    """How one pinned field changed, in words."""

    field: str
    summary: str

    def __str__(self) -> str:
        return f"{self.field}: {self.summary}"


def _diff_text(old: str, new: str) -> str:
    parts: list[str] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "insert":
            parts.append(f"added '{_show(new[j1:j2])}'")
        elif op == "delete":
            parts.append(f"removed '{_show(old[i1:i2])}'")
        elif op == "replace":
            parts.append(f"'{_show(old[i1:i2])}' → '{_show(new[j1:j2])}'")
    if len(parts) > 4:
        parts = [*parts[:4], f"and {len(parts) - 4} more edits"]
    return f"{len(old)} → {len(new)} characters: " + "; ".join(parts)


def _type_of(prop: Any) -> str:
    if isinstance(prop, dict):
        return canonical_json(prop.get("type", prop.get("anyOf", prop.get("$ref", "any"))))
    return "any"


def _diff_schema(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return f"{_show(canonical_json(old))} → {_show(canonical_json(new))}"
    parts: list[str] = []
    old_props = old.get("properties") if isinstance(old.get("properties"), dict) else {}
    new_props = new.get("properties") if isinstance(new.get("properties"), dict) else {}
    assert isinstance(old_props, dict) and isinstance(new_props, dict)
    added = sorted(set(new_props) - set(old_props))
    removed = sorted(set(old_props) - set(new_props))
    if added:
        parts.append("parameters added: " + ", ".join(added))
    if removed:
        parts.append("parameters removed: " + ", ".join(removed))
    for name in sorted(set(old_props) & set(new_props)):
        before, after = old_props[name], new_props[name]
        if before == after:
            continue
        if _type_of(before) != _type_of(after):
            parts.append(f"parameter {name} type {_type_of(before)} → {_type_of(after)}")
        elif isinstance(before, dict) and isinstance(after, dict) and (
                before.get("description") != after.get("description")):
            parts.append(f"parameter {name} description "
                         + _diff_text(str(before.get("description") or ""),
                                      str(after.get("description") or "")))
        else:
            parts.append(f"parameter {name} changed")
    old_req, new_req = set(old.get("required") or []), set(new.get("required") or [])
    if old_req != new_req:
        parts.append(f"required {sorted(old_req)} → {sorted(new_req)}")
    rest_old = {k: v for k, v in old.items() if k not in ("properties", "required")}
    rest_new = {k: v for k, v in new.items() if k not in ("properties", "required")}
    if rest_old != rest_new:
        keys = sorted(k for k in set(rest_old) | set(rest_new) if rest_old.get(k) != rest_new.get(k))
        parts.append("schema keys changed: " + ", ".join(keys))
    return "; ".join(parts) or "changed"


def _diff_mapping(old: Any, new: Any) -> str:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return f"{_show(canonical_json(old))} → {_show(canonical_json(new))}"
    parts = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            before = canonical_json(old[key]) if key in old else "(unset)"
            after = canonical_json(new[key]) if key in new else "(unset)"
            parts.append(f"{key} {_show(before)} → {_show(after)}")
    return "; ".join(parts) or "changed"


def diff_fields(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldChange]:
    """Which pinned fields differ between two pinned views, and how."""
    changes: list[FieldChange] = []
    for name in PIN_FIELDS:
        before, after = old.get(name), new.get(name)
        if canonical_json(before) == canonical_json(after):
            continue
        if name == "description":
            summary = _diff_text(str(before or ""), str(after or ""))
        elif name == "inputSchema":
            summary = _diff_schema(before, after)
        elif name == "annotations":
            summary = _diff_mapping(before, after)
        else:
            summary = f"'{_show(str(before))}' → '{_show(str(after))}'"
        changes.append(FieldChange(name, summary))
    return changes


@dataclass(frozen=True, slots=True)
class PinChange:
    """A tool whose current definition differs from its pin."""

    server: str
    tool: str
    fields: tuple[FieldChange, ...]
    pinned_fingerprint: str
    current_fingerprint: str
    detected_at: float
    blocked: bool

    def describe(self) -> str:
        """Several lines: which tool, then one line per changed field."""
        head = f"{self.server}/{self.tool}: changed since pinned"
        if self.blocked:
            head += " (blocked until accepted)"
        return "\n".join([head, *(f"  {change}" for change in self.fields)])

    def as_dict(self) -> dict[str, Any]:
        return {"server": self.server, "tool": self.tool, "blocked": self.blocked,
                "detected_at": self.detected_at,
                "fields": [{"field": c.field, "change": c.summary} for c in self.fields]}
