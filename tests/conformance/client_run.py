"""Run the conformance suite's *client* scenarios with the hub as the client under test.

Usage (from the repository root)::

    python -m tests.conformance.client_run                      # every scenario below
    python -m tests.conformance.client_run auth/scope-step-up   # some of them
    python -m tests.conformance.client_run --next               # the 0.2 suite's scenarios
    python -m tests.conformance.client_run --next auth/enterprise-managed-authorization

Each scenario starts the suite's test server (and authorization server) and runs
``tests/conformance/oauth_client.py``, which drives the hub through its CLI only.
Prints one line per scenario and a count; exit status 1 if any failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.conformance.results import ScenarioResult, classify
from tests.conformance.run import NODE, ROOT, SUITE_JS, SUITE_JS_NEXT

#: The dated auth scenarios (2025-03-26, 2025-06-18, 2025-11-25), the draft ones and the
#: client-credentials extension with a client secret.
AUTH_SCENARIOS = [
    "auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
    "auth/basic-cimd", "auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined", "auth/scope-step-up", "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none", "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
    "auth/client-credentials-basic", "auth/client-credentials-jwt",
]
#: Extension scenarios of the suite's 0.2 line (``conformance-next``): DPoP-bound tokens
#: and the JWT-bearer grant of workload identity federation.
NEXT_SCENARIOS = ["auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer"]
CORE_SCENARIOS = ["initialize", "tools_call"]
#: Identity exchanged for upstream tokens: Enterprise-Managed Authorization (ID-JAG), in
#: the 0.1 suite and (as its extension) in the 0.2 one.
EXCHANGE_SCENARIOS = ["auth/cross-app-access-complete-flow"]
EXCHANGE_SCENARIOS_NEXT = ["auth/enterprise-managed-authorization"]
DRIVER = f"cd {ROOT} && {sys.executable} -m tests.conformance.oauth_client"


def run_scenario(scenario: str, timeout_s: float = 300.0, suite_js: Path = SUITE_JS
                 ) -> ScenarioResult:
    """Run one client scenario against the driver; the result of its checks."""
    with tempfile.TemporaryDirectory(prefix="hub-client-conformance-") as tmp:
        cmd = [str(NODE), str(suite_js), "client", "--command", DRIVER, "--scenario", scenario,
               "--timeout", str(int(timeout_s * 1000) - 5000), "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s + 30,
                              env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "0"},
                              check=False)
        checks: list[dict[str, object]] = []
        for checks_file in Path(tmp).rglob("checks.json"):
            data = json.loads(checks_file.read_text())
            checks += data if isinstance(data, list) else []
        result = classify(checks)
        if not checks:
            result.reason = f"no checks; suite said: {(proc.stdout + proc.stderr)[-600:]}"
        return result


def main(argv: list[str]) -> int:
    suite_js = SUITE_JS_NEXT if "--next" in argv else SUITE_JS
    argv = [a for a in argv if a != "--next"]
    default = ([*NEXT_SCENARIOS, *EXCHANGE_SCENARIOS_NEXT] if suite_js == SUITE_JS_NEXT
               else [*AUTH_SCENARIOS, *CORE_SCENARIOS, *EXCHANGE_SCENARIOS])
    scenarios = argv or default
    failed = 0
    for scenario in scenarios:
        result = run_scenario(scenario, suite_js=suite_js)
        failed += result.status == "fail"
        print(f"{result.status.upper():5} {scenario}" + (f"  {result.reason}" if result.reason
                                                         else ""), flush=True)
    print(f"{len(scenarios) - failed}/{len(scenarios)} scenarios without failures")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
