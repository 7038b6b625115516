"""Tool pinning: trust on first use, and a loud signal when an upstream changes a tool.

The first time the hub sees an upstream tool it records a fingerprint of what
the model will read — the raw name, the description, the input schema and the
annotations — in ``<state dir>/pins.json``. When a later listing differs (a
"rug pull": an approved tool quietly rewritten to carry instructions), the
change is recorded next to the pin and handled by the server's policy
(``[servers.X] pin_policy``, default ``[pins] policy``):

* ``warn`` (default): log a warning, show the change in ``hub_status`` and
  ``mcp-hub pins diff``; the tool stays available with its new definition;
* ``block``: as ``warn``, and the changed tool is hidden until
  ``mcp-hub pins accept SERVER[/TOOL]`` re-pins it;
* ``off``: no fingerprints are kept or compared.

Descriptions are also scanned with :func:`mcp_hub.registry.sanitize.tool_findings`;
flagged tools are listed in the report whatever their pin state.

The file is JSON, written atomically (temporary file + ``os.replace``) under
an advisory lock (``pins.json.lock``), so the serving hub and the CLI can
update it concurrently and a reader never sees a half-written file. Every
write re-reads the file under the lock and applies its change to the freshest
content. A tool going back to its pinned definition clears its recorded change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mcp_hub.config.model import HubConfig
from mcp_hub.errors import HubError
from mcp_hub.pins.diff import (
    PIN_FIELDS,
    FieldChange,
    PinChange,
    canonical_json,
    diff_fields,
    fingerprint,
    pinned_view,
)
from mcp_hub.plumbing.atomic_files import replace_file
from mcp_hub.registry.sanitize import tool_findings

__all__ = [
    "PIN_FIELDS",
    "FieldChange",
    "PinChange",
    "PinError",
    "PinStore",
    "PinVerdict",
    "Policy",
    "adopt_pins",
    "diff_fields",
    "fingerprint",
    "pinned_view",
    "pins_path",
]

logger = logging.getLogger("mcp_hub.pins.pinning")

Policy = Literal["warn", "block", "off"]
Status = Literal["new", "ok", "changed", "unchecked"]

#: What a fingerprint covers: what the model reads and what decides how a client treats the tool.
_FORMAT_VERSION = 1


class PinError(HubError):
    """The pin file cannot be read or written (the message names the file)."""


# --------------------------------------------------------------------------- diffs


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class PinVerdict:
    """What :meth:`PinStore.check` decided for one tool.

    ``status``: ``new`` (just pinned), ``ok`` (matches its pin), ``changed``
    (differs; ``change`` says how), ``unchecked`` (policy ``off``).
    ``blocked``: the caller must not expose the tool.
    """

    status: Status
    blocked: bool = False
    change: PinChange | None = None
    findings: tuple[str, ...] = ()


@dataclass
class _Observed:
    findings: tuple[str, ...] = ()
    blocked: bool = False


_RECORD_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


@dataclass
class PinState:
    servers: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


# --------------------------------------------------------------------------- the store


class PinStore:
    """The pin file of one hub: fingerprints, recorded changes, and the policy.

    ``policy`` is the default (``[pins] policy``); ``server_policies`` overrides it
    per server (``[servers.X] pin_policy``). Thread-safe; cheap for unchanged tools
    (no disk access beyond one ``stat`` per :meth:`check_many`).
    """

    def __init__(self, path: Path, *, policy: Policy = "warn",
                 server_policies: Mapping[str, Policy | None] | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.policy: Policy = policy
        self.server_policies: dict[str, Policy] = {
            k: v for k, v in (server_policies or {}).items() if v is not None}
        self._clock = clock
        self._lock = threading.RLock()
        self._state = PinState()
        self._stamp: tuple[int, int] | None = None
        self._observed: dict[tuple[str, str], _Observed] = {}
        self._warned: set[tuple[str, str, str]] = set()
        #: Encoded line of each record by (server, tool), with the record it encodes (:meth:`_dump`).
        self._lines: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        self._load_if_changed()

    def policy_for(self, server: str) -> Policy:
        return self.server_policies.get(server, self.policy)

    # -- file ----------------------------------------------------------------------------
    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._lock_path, "a+b") as handle:
            if sys.platform != "win32":
                import fcntl

                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                if sys.platform != "win32":
                    import fcntl

                    fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _read(self) -> PinState:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return PinState()
        except OSError as exc:
            raise PinError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PinError(f"{self.path}: not valid JSON ({exc}); move it away to start "
                           "pinning afresh") from None
        servers = data.get("servers") if isinstance(data, dict) else None
        if not isinstance(servers, dict):
            raise PinError(f"{self.path}: no 'servers' object; move it away to start afresh")
        return PinState({str(k): dict(v) for k, v in servers.items() if isinstance(v, dict)})

    def _dump(self, state: PinState) -> list[bytes]:
        """The pins as UTF-8 JSON, in pieces: one line per tool, keys sorted.

        ``json.dumps(indent=…)`` runs Python's pure-Python encoder: for the pins of a
        thousand tools that took about 100 ms, on the event loop, at every upstream
        change. Here each record is encoded by the C encoder, and only when it is a
        record this store has not encoded yet: records are replaced, never changed in
        place, so an unchanged record's line is reused as it is, and the pieces are
        written as they are, without joining megabytes first.
        """
        lines = self._lines
        used: dict[tuple[str, str], tuple[dict[str, Any], bytes]] = {}
        encode = _RECORD_ENCODER.encode
        out = [b'{\n "servers": {']
        for i, (server, records) in enumerate(sorted(state.servers.items())):
            out.append(f'{"," if i else ""}\n  {encode(server)}: {{'.encode())
            for j, raw in enumerate(sorted(records)):
                record = records[raw]
                key = (server, raw)
                held = lines.get(key)
                if held is None or held[0] is not record:
                    held = (record, f"\n   {encode(raw)}: {encode(record)}".encode())
                used[key] = held
                if j:
                    out.append(b",")
                out.append(held[1])
            out.append(b"\n  }")
        out.append(f'\n }},\n "version": {_FORMAT_VERSION}\n}}\n'.encode())
        self._lines = used
        return out

    def _write(self, state: PinState) -> None:
        pieces = self._dump(state)
        replace_file(self.path, pieces, prefix=".pins-")

    def _load_if_changed(self) -> bool:
        stamp = self._stat()
        if stamp == self._stamp and stamp is not None:
            return False
        self._state = self._read()
        self._stamp = stamp
        return True

    def reload(self) -> set[str]:
        """Re-read the file if another process changed it; the servers whose records differ.

        A serving hub calls this periodically so that ``mcp-hub pins accept`` takes
        effect without a restart (refresh the returned servers' tools).
        """
        with self._lock:
            old = self._state
            if not self._load_if_changed():
                return set()  # the common case costs one stat, not a canonical dump of every pin
            before = {k: canonical_json(v) for k, v in old.servers.items()}
            after = {k: canonical_json(v) for k, v in self._state.servers.items()}
            return {k for k in set(before) | set(after) if before.get(k) != after.get(k)}

    def _mutate(self, fn: Callable[[PinState], bool]) -> None:
        """Apply ``fn`` to the freshest file content under the lock; write if it changed.

        The file is parsed again only if it changed on disk since this process last
        read or wrote it: a serving hub checks every listing of every upstream, and
        re-parsing the pins of a thousand tools at each change cost a busy loop tens
        of milliseconds, and left as many objects for the garbage collector.
        """
        with self._lock, self._file_lock():
            stamp = self._stat()
            fresh = stamp is not None and stamp == self._stamp
            state = self._state if fresh else self._read()
            try:
                if fn(state):
                    self._write(state)
            except BaseException:
                self._stamp = None  # the state may be half-changed: read the file next time
                raise
            self._state = state
            self._stamp = self._stat()

    # -- checking ------------------------------------------------------------------------
    def check(self, server: str, raw_name: str, tool_def: Mapping[str, Any]) -> PinVerdict:
        """Compare one tool with its pin (pinning it if new); see :meth:`check_many`."""
        return self.check_many(server, {raw_name: tool_def})[raw_name]

    def check_many(self, server: str, tools: Mapping[str, Mapping[str, Any]]
                   ) -> dict[str, PinVerdict]:
        """Check every tool of one listing of ``server`` (raw name → MCP definition).

        New tools are pinned; changed tools are recorded; the file is written at
        most once. Under policy ``block`` a changed tool's verdict is ``blocked``.
        """
        policy = self.policy_for(server)
        verdicts: dict[str, PinVerdict] = {}
        views = {raw: pinned_view(raw, d) for raw, d in tools.items()}
        findings = {raw: tuple(tool_findings(dict(views[raw]))) for raw in tools}
        with self._lock:
            for raw in tools:
                self._note_findings(server, raw, findings[raw])
            if policy == "off":
                for raw in tools:
                    self._observed.setdefault((server, raw), _Observed()).blocked = False
                    verdicts[raw] = PinVerdict("unchecked", findings=findings[raw])
                return verdicts
            self._load_if_changed()
            now = self._clock()
            records = self._state.servers.get(server, {})
            pending_writes: dict[str, dict[str, Any]] = {}
            for raw, view in views.items():
                fp = "sha256:" + hashlib.sha256(canonical_json(view).encode("utf-8")).hexdigest()
                record = records.get(raw)
                if record is None:
                    pending_writes[raw] = {"fingerprint": fp, "pinned_at": now, "tool": view}
                    verdicts[raw] = PinVerdict("new", findings=findings[raw])
                    continue
                if record.get("fingerprint") == fp:
                    if "changed" in record:
                        pending_writes[raw] = {k: v for k, v in record.items() if k != "changed"}
                    verdicts[raw] = PinVerdict("ok", findings=findings[raw])
                    continue
                seen = record.get("changed")
                detected = now
                if isinstance(seen, dict) and seen.get("fingerprint") == fp:
                    detected = float(seen.get("detected_at", now))
                else:
                    pending_writes[raw] = {**record, "changed": {
                        "fingerprint": fp, "detected_at": now, "tool": view}}
                blocked = policy == "block"
                change = PinChange(server, raw, tuple(diff_fields(record.get("tool") or {}, view)),
                                   str(record.get("fingerprint")), fp, detected, blocked)
                verdicts[raw] = PinVerdict("changed", blocked, change, findings[raw])
            for raw, verdict in verdicts.items():
                self._observed.setdefault((server, raw), _Observed()).blocked = verdict.blocked
            if pending_writes:
                self._save_records(server, pending_writes)
        for verdict in verdicts.values():
            if verdict.change is not None:
                self._warn(verdict.change)
        return verdicts

    def _save_records(self, server: str, records: dict[str, dict[str, Any]]) -> None:
        def apply(state: PinState) -> bool:
            current = state.servers.setdefault(server, {})
            changed = False
            for raw, record in records.items():
                old = current.get(raw)
                if old is not None and "changed" not in record and "changed" not in old and \
                        old.get("fingerprint") != record.get("fingerprint"):
                    # Pinned by another process meanwhile with a different definition:
                    # the first pin wins, and this one is recorded as a change.
                    record = {**old, "changed": {"fingerprint": record["fingerprint"],
                                                 "detected_at": record["pinned_at"],
                                                 "tool": record["tool"]}}
                if old != record:
                    current[raw] = record
                    changed = True
            return changed

        try:
            self._mutate(apply)
        except OSError as exc:
            logger.error("pins: cannot write %s: %s", self.path, exc.strerror or exc,
                         extra={"server": server})

    def _note_findings(self, server: str, raw: str, findings: tuple[str, ...]) -> None:
        observed = self._observed.setdefault((server, raw), _Observed())
        if findings and findings != observed.findings:
            logger.warning("upstream %s: tool %s description carries instructions aimed at the model: %s",
                           server, raw, "; ".join(findings), extra={"server": server})
        observed.findings = findings

    def _warn(self, change: PinChange) -> None:
        key = (change.server, change.tool, change.current_fingerprint)
        if key in self._warned:
            return
        self._warned.add(key)
        action = (f"hidden until `mcp-hub pins accept {change.server}/{change.tool}`"
                  if change.blocked else "still served (pin policy warn)")
        logger.warning("upstream %s: tool %s changed since it was pinned (%s); %s",
                       change.server, change.tool,
                       "; ".join(str(c) for c in change.fields) or "fingerprint differs", action,
                       extra={"server": change.server})

    def forget_server(self, server: str) -> None:
        """Drop what is known in memory about ``server``'s live tools (it went away)."""
        with self._lock:
            for key in [k for k in self._observed if k[0] == server]:
                del self._observed[key]

    # -- reading -------------------------------------------------------------------------
    def diff(self, server: str | None = None) -> list[PinChange]:
        """Every recorded change (of ``server`` only, if given), sorted by server and tool."""
        with self._lock:
            self._load_if_changed()
            out: list[PinChange] = []
            for name in sorted(self._state.servers):
                if server is not None and name != server:
                    continue
                blocked = self.policy_for(name) == "block"
                for raw, record in sorted(self._state.servers[name].items()):
                    seen = record.get("changed")
                    if not isinstance(seen, dict):
                        continue
                    out.append(PinChange(
                        name, raw, tuple(diff_fields(record.get("tool") or {}, seen.get("tool") or {})),
                        str(record.get("fingerprint")), str(seen.get("fingerprint")),
                        float(seen.get("detected_at", 0.0)), blocked))
            return out

    def is_blocked(self, server: str, raw_name: str) -> bool:
        """Whether the last check of this tool decided to hide it."""
        with self._lock:
            observed = self._observed.get((server, raw_name))
            return observed is not None and observed.blocked

    def accept(self, server: str, tool: str | None = None) -> list[str]:
        """Re-pin the recorded changes of ``server`` (one ``tool`` or all); the accepted names."""
        accepted: list[str] = []

        def apply(state: PinState) -> bool:
            records = state.servers.get(server, {})
            for raw, record in records.items():
                seen = record.get("changed")
                if (tool is not None and raw != tool) or not isinstance(seen, dict):
                    continue
                records[raw] = {"fingerprint": seen.get("fingerprint"),
                                "pinned_at": self._clock(), "tool": seen.get("tool")}
                accepted.append(raw)
            return bool(accepted)

        self._mutate(apply)
        with self._lock:
            for raw in accepted:
                observed = self._observed.get((server, raw))
                if observed is not None:
                    observed.blocked = False
        for raw in accepted:
            logger.info("pins: accepted the current definition of %s/%s", server, raw,
                        extra={"server": server})
        return sorted(accepted)

    def report(self) -> dict[str, Any]:
        """For ``hub_status``: the policy, recorded changes, blocked and flagged tools."""
        changes = self.diff()
        with self._lock:
            pinned = sum(len(v) for v in self._state.servers.values())
            blocked = sorted(f"{s}/{t}" for (s, t), o in self._observed.items() if o.blocked)
            flagged = [{"server": s, "tool": t, "findings": list(o.findings)}
                       for (s, t), o in sorted(self._observed.items()) if o.findings]
        return {
            "policy": self.policy,
            "server_policies": dict(sorted(self.server_policies.items())),
            "file": str(self.path),
            "pinned": pinned,
            "changed": [c.as_dict() for c in changes],
            "blocked": blocked,
            "flagged": flagged,
        }


def pins_path(config: HubConfig) -> Path:
    """``<state dir>/pins.json`` of ``config`` (see :meth:`HubConfig.state_path`)."""
    return config.state_path() / "pins.json"




def adopt_pins(store: PinStore, legacy: Path, servers: Iterable[str]) -> int:
    """Copy the pins of ``servers`` from the per-user pin file ``legacy`` into ``store``'s
    file, once: only while that file does not exist yet. How many servers came over.

    The copy is written even when empty, so the per-user file is read once per config.
    An unreadable per-user file copies nothing (and is left for ``mcp-hub pins`` to name).
    """
    if store.path.exists() or not legacy.is_file() or legacy == store.path:
        return 0
    try:
        old = PinStore(legacy)._read()
    except PinError:
        return 0
    wanted = set(servers)
    kept = PinState({s: r for s, r in old.servers.items() if s in wanted})
    with store._lock, store._file_lock():
        if store.path.exists():
            return 0
        store._write(kept)
    store._load_if_changed()
    if kept.servers:
        logger.info("pins of %s carried over from %s to %s", ", ".join(sorted(kept.servers)),
                    legacy, store.path)
    return len(kept.servers)
