"""Parsing and comparing results of the official MCP conformance suite.

The suite (``conformance server --url … -o DIR``) writes one directory per
scenario, ``server-<scenario>-<ISO timestamp>/checks.json``, holding a list of
checks with a ``status`` of SUCCESS, FAILURE, WARNING or INFO. A scenario here
is:

- ``pass``: no FAILURE and no WARNING check;
- ``warn``: at least one WARNING (a SHOULD the server does not do), no FAILURE;
- ``fail``: at least one FAILURE, or no checks at all (the scenario crashed).

The suite's own baseline treats warnings like failures; we keep them apart so
the report says which is which, and order them pass > warn > fail when
comparing a direct run with a run through the hub.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["pass", "warn", "fail"]
RANK: dict[str, int] = {"fail": 0, "warn": 1, "pass": 2}

_DIR_RE = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
_RAN_RE = re.compile(r"^=== Running scenario: (?P<scenario>\S+) ===$", re.MULTILINE)
_CRASH_RE = re.compile(r"^Failed to run scenario (?P<scenario>\S+): ?(?P<error>.*)$", re.MULTILINE)


@dataclass
class ScenarioResult:
    status: Status
    reason: str | None = None
    passed: int = 0
    failed: int = 0
    warnings: int = 0


@dataclass
class SuiteResult:
    url: str
    suite: str
    scenarios: dict[str, ScenarioResult] = field(default_factory=dict)

    def count(self, status: Status) -> int:
        return sum(1 for r in self.scenarios.values() if r.status == status)

    @property
    def summary(self) -> dict[str, int]:
        return {
            "total": len(self.scenarios),
            "passed": self.count("pass"),
            "warned": self.count("warn"),
            "failed": self.count("fail"),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "suite": self.suite,
            "summary": self.summary,
            "scenarios": {name: asdict(r) for name, r in sorted(self.scenarios.items())},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuiteResult:
        return cls(
            url=data["url"],
            suite=data["suite"],
            scenarios={k: ScenarioResult(**v) for k, v in data["scenarios"].items()},
        )


def classify(checks: list[dict[str, Any]]) -> ScenarioResult:
    """Turn one scenario's checks.json into a ScenarioResult."""
    failed = [c for c in checks if c.get("status") == "FAILURE"]
    warned = [c for c in checks if c.get("status") == "WARNING"]
    passed = sum(1 for c in checks if c.get("status") == "SUCCESS")

    def why(items: list[dict[str, Any]]) -> str:
        parts = [f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}" for c in items]
        return "; ".join(parts[:5]) + (" …" if len(parts) > 5 else "")

    if failed:
        status: Status = "fail"
        reason: str | None = why(failed)
    elif warned:
        status, reason = "warn", why(warned)
    elif not checks:
        status, reason = "fail", "the scenario produced no checks"
    else:
        status, reason = "pass", None
    return ScenarioResult(status, reason, passed, len(failed), len(warned))


def parse_output_dir(output_dir: Path, stdout: str = "") -> dict[str, ScenarioResult]:
    """Read every ``server-<scenario>-<ts>/checks.json`` under ``output_dir``.

    ``stdout`` (the suite's console output) adds scenarios that ran but left no
    checks.json because they crashed, with the suite's error message as reason.
    """
    results: dict[str, ScenarioResult] = {}
    for checks_file in sorted(output_dir.glob("*/checks.json")):
        match = _DIR_RE.match(checks_file.parent.name)
        if match is None:
            continue
        checks = json.loads(checks_file.read_text())
        results[match["scenario"]] = classify(checks if isinstance(checks, list) else [])
    crashes = {m["scenario"]: m["error"] for m in _CRASH_RE.finditer(stdout)}
    for match in _RAN_RE.finditer(stdout):
        name = match["scenario"]
        if name not in results:
            reason = crashes.get(name) or "the scenario left no results"
            results[name] = ScenarioResult("fail", f"crashed: {reason}")
    return results


# --------------------------------------------------------------------------- expected failures


def load_expected_failures(path: Path) -> dict[str, str]:
    """``scenario reason…`` per line; blank lines and ``#`` comments are skipped.

    A line without a reason is an error: every expected failure must say why.
    """
    entries: dict[str, str] = {}
    if not path.exists():
        return entries
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        if not reason.strip():
            raise ValueError(f"{path}:{lineno}: expected failure {name!r} has no reason")
        entries[name] = reason.strip()
    return entries


@dataclass
class Comparison:
    """Direct run vs. hub run: the hub must do at least as well on every scenario."""

    direct: SuiteResult
    hub: SuiteResult
    expected: dict[str, str]
    regressions: dict[str, str] = field(default_factory=dict)
    excused: dict[str, str] = field(default_factory=dict)
    invalid_entries: dict[str, str] = field(default_factory=dict)
    stale_entries: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.regressions or self.invalid_entries or self.stale_entries)

    def report(self) -> str:
        lines = [
            f"{label}: {s['passed']}/{s['total']} passed, "
            f"{s['warned']} warned, {s['failed']} failed"
            for label, s in (("direct", self.direct.summary), ("hub   ", self.hub.summary))
        ]
        for name, why in sorted(self.regressions.items()):
            lines.append(f"REGRESSION {name}: {why}")
        for name, why in sorted(self.excused.items()):
            lines.append(f"expected   {name}: {why}")
        for name, why in sorted(self.invalid_entries.items()):
            lines.append(f"INVALID expected-failure entry {name}: {why}")
        for name in self.stale_entries:
            lines.append(f"STALE expected-failure entry {name}: passes through the hub now")
        lines.append("OK" if self.ok else "NOT OK")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "direct": self.direct.to_json(),
            "hub": self.hub.to_json(),
            "regressions": self.regressions,
            "excused": self.excused,
            "invalid_entries": self.invalid_entries,
            "stale_entries": self.stale_entries,
        }


def compare(direct: SuiteResult, hub: SuiteResult, expected: dict[str, str]) -> Comparison:
    """Every scenario must do as well through the hub as directly.

    An expected-failures entry excuses a scenario only if the scenario does not
    pass directly either (an entry for a scenario that passes directly is
    invalid), and an entry whose scenario now passes through the hub is stale.
    """
    result = Comparison(direct, hub, expected)
    for name, why in expected.items():
        base = direct.scenarios.get(name)
        if base is not None and base.status == "pass":
            result.invalid_entries[name] = f"passes directly, so the hub must pass it ({why})"
    for name, base in sorted(direct.scenarios.items()):
        got = hub.scenarios.get(name) or ScenarioResult("fail", "not run through the hub")
        if name in expected and name not in result.invalid_entries:
            if got.status == "pass":
                result.stale_entries.append(name)
            else:
                result.excused[name] = expected[name]
            continue
        if RANK[got.status] < RANK[base.status]:
            result.regressions[name] = f"direct {base.status}, hub {got.status}: {got.reason}"
    return result
