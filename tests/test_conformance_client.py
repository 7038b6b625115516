"""The official conformance suite's client scenarios, with the hub as the client under test.

The hub is driven only through its CLI and a servers.toml
(``tests/conformance/oauth_client.py``): ``mcp-hub login`` with the printed URL
followed, then ``mcp-hub tools`` and ``mcp-hub call``. Every dated auth scenario,
the draft ones, client credentials (secret and private_key_jwt) and the core
scenarios must pass, and so must the 0.2 line's DPoP and workload identity
(JWT-bearer) scenarios.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conformance import client_run, run

pytestmark = pytest.mark.node


def test_every_client_scenario_passes_with_the_hub_as_client() -> None:
    if not run.suite_available():
        if os.environ.get("CI") == "true":
            pytest.fail("the conformance suite is not installed (make setup)")
        pytest.skip("the conformance suite is not installed (make setup)")
    scenarios = [*client_run.AUTH_SCENARIOS, *client_run.CORE_SCENARIOS]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(scenarios, pool.map(client_run.run_scenario, scenarios), strict=True))
    failed = {name: r.reason for name, r in results.items() if r.status == "fail"}
    assert not failed, failed
    assert len(results) == 23


def test_enterprise_managed_authorization_scenarios_pass_with_the_hub_as_client() -> None:
    """The ID token exchanged at the IdP for an ID-JAG, then the JWT-bearer grant at the
    upstream's authorization server: the 0.1 suite's scenario and the 0.2 one's extension."""
    if not (run.suite_available() and run.suite_available(run.SUITE_JS_NEXT)):
        if os.environ.get("CI") == "true":
            pytest.fail("the conformance suites are not installed (make setup)")
        pytest.skip("the conformance suites are not installed (make setup)")
    runs = [(s, run.SUITE_JS) for s in client_run.EXCHANGE_SCENARIOS]
    runs += [(s, run.SUITE_JS_NEXT) for s in client_run.EXCHANGE_SCENARIOS_NEXT]
    results = {s: client_run.run_scenario(s, suite_js=js) for s, js in runs}
    failed = {name: r.reason for name, r in results.items() if r.status != "pass"}
    assert not failed, failed
    assert len(results) == 2


def test_dpop_and_workload_identity_scenarios_pass_with_the_hub_as_client() -> None:
    if not run.suite_available(run.SUITE_JS_NEXT):
        if os.environ.get("CI") == "true":
            pytest.fail("the conformance suite's 0.2 line is not installed (make setup)")
        pytest.skip("the conformance suite's 0.2 line is not installed (make setup)")
    scenarios = client_run.NEXT_SCENARIOS
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(scenarios, pool.map(
            lambda s: client_run.run_scenario(s, suite_js=run.SUITE_JS_NEXT), scenarios),
            strict=True))
    failed = {name: r.reason for name, r in results.items() if r.status != "pass"}
    assert not failed, failed
    assert sorted(results) == ["auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer"]
