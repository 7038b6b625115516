"""The /metrics body is valid Prometheus text: families grouped, labels escaped, no secrets."""

from __future__ import annotations

from dataclasses import dataclass

from mcp_hub.hub.metrics import Metrics
from mcp_hub.redact import add_secrets


@dataclass
class _Status:
    name: str
    state: str
    tools: int
    reconnects: int
    in_flight: int = 0


def test_each_metric_family_is_one_contiguous_group_after_its_type_line() -> None:
    m = Metrics()
    m.observe_call("a_echo", "a", "ok", 0.002, 0.0)
    m.observe_call("b_echo", "b", "error", 0.2, 0.0)
    body = m.render(upstreams=[_Status("a", "ready", 3, 0), _Status("b", "parked", 0, 2, 1)],
                    list_changed={"tools": 4}, sessions=2)
    seen: list[str] = []
    for line in body.splitlines():
        if line.startswith("# TYPE"):
            family = line.split()[2]
            assert family not in seen, f"{family} appears twice"
            seen.append(family)
        elif line and not line.startswith("#"):
            name = line.split("{")[0].split(" ")[0]
            base = seen[-1]
            assert name == base or name.startswith(base + "_"), (name, base)
    assert 'mcp_hub_upstream_up{server="a"} 1' in body
    assert 'mcp_hub_upstream_in_flight{server="b"} 1' in body
    assert 'mcp_hub_tool_call_seconds_count{server="b"} 1' in body
    assert "mcp_hub_sessions 2" in body


def test_label_values_are_escaped_and_secrets_redacted() -> None:
    add_secrets(["sup3r-secret-value-xyz"])
    m = Metrics()
    m.observe_call('we"ird\\name', "sup3r-secret-value-xyz", "ok", 0.01, 0.0)
    body = m.render(upstreams=[], list_changed={}, sessions=0)
    assert 'tool="we\\"ird\\\\name"' in body
    assert "sup3r-secret-value-xyz" not in body


@dataclass
class _View:
    tools: set[str]
    servers: set[str]
    identity: str

    def shows_tool(self, name: str) -> bool:
        return name in self.tools

    def shows_server(self, name: str) -> bool:
        return name in self.servers

    def shows_identity(self, name: str) -> bool:
        return name == self.identity


def test_a_view_renders_only_its_tools_servers_and_identity() -> None:
    m = Metrics()
    m.observe_call("a_echo", "a", "ok", 0.002, 0.0, identity="alice")
    m.observe_call("b_echo", "b", "ok", 0.002, 0.0, identity="bob")
    body = m.render(upstreams=[_Status("a", "ready", 3, 0), _Status("b", "ready", 3, 0)],
                    list_changed={}, sessions=0, view=_View({"a_echo"}, {"a"}, "alice"))
    assert 'tool="a_echo"' in body and 'server="a"' in body and 'identity="alice"' in body
    assert "b_echo" not in body and 'server="b"' not in body and "bob" not in body
    assert m.identity_summary(lambda who: who == "alice") == {"alice": {"ok": 1}}


def test_an_unknown_call_adds_no_latency_histogram() -> None:
    m = Metrics()
    m.observe_call("(unknown)", "hub", "unknown", 0.001, 0.0)
    body = m.render(upstreams=[], list_changed={}, sessions=0)
    assert 'mcp_hub_tool_calls_total{tool="(unknown)",server="hub",status="unknown"} 1' in body
    assert "mcp_hub_tool_call_seconds_bucket" not in body
