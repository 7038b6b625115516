"""The hub as the client under test of the conformance suite's client scenarios.

The suite runs ``python -m tests.conformance.oauth_client <server-url>`` with the
scenario in ``MCP_CONFORMANCE_SCENARIO`` and its credentials, if any, in
``MCP_CONFORMANCE_CONTEXT``. This driver touches the hub only through its CLI
and a servers.toml, as a user would:

1. write a servers.toml naming the test server with ``auth = "oauth"`` (and the
   pre-registered or client-credentials identity the scenario hands out: a secret,
   a private key (``private_key_jwt``) or a workload JWT (``jwt_bearer``), each
   key or JWT in a file; ``dpop = true`` for the DPoP scenarios; for
   Enterprise-Managed Authorization the IdP, its ID token in a file, and the
   upstream's authorization server, which an operator would look up once in the
   server's protected resource metadata, as :func:`authorization_server` does);
2. ``mcp-hub login up --no-browser``: read the URL it prints and follow it (the
   suite's authorization endpoint redirects at once, to the login's loopback port);
   with the ``id_jag`` grant the login prints no URL: it makes the exchange at once;
3. ``mcp-hub tools --json``, then ``mcp-hub call`` for each of the server's tools;
   when a call reports that the server needs a login (a scope step-up), log in
   once more and call again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2

#: The hub's public URL: the hub then uses ``<it>/client-metadata.json``, the document it
#: serves itself, as its client_id where CIMD is supported; the suite's CIMD scenario
#: expects exactly https://conformance-test.local/client-metadata.json.
PUBLIC_URL = "https://conformance-test.local"
HUB = [sys.executable, "-m", "mcp_hub"]
STEP_TIMEOUT = 60.0
#: Arguments for the suite's tools that need some (everything else is called with none).
TOOL_ARGS = {"add_numbers": {"a": 5, "b": 3}}


def _toml(url: str, scenario: str, context: dict[str, str], state_dir: str) -> str:
    lines = ["[hub]", f"state_dir = {json.dumps(state_dir)}", "",
             "[hub.http]", f"public_url = {json.dumps(PUBLIC_URL)}", "",
             "[servers.up]", f"url = {json.dumps(url)}", 'prefix = ""', "timeout = 20"]
    if scenario.startswith("auth/"):
        lines += ['auth = "oauth"', "", "[servers.up.oauth]"]
        if "client_id" in context and "client_secret" in context:
            lines += [f"client_id = {json.dumps(context['client_id'])}",
                      f"client_secret = {json.dumps(context['client_secret'])}"]
        if scenario.startswith("auth/client-credentials"):
            lines.append('grant = "client_credentials"')
        if "idp_token_endpoint" in context:
            lines += _id_jag_lines(url, context, state_dir)
        else:
            lines += _key_grant_lines(scenario, context, state_dir)
    return "\n".join(lines) + "\n"


def authorization_server(url: str) -> str:
    """The first authorization server the MCP server's protected resource metadata names."""
    answer = httpx2.post(url, json={}, timeout=STEP_TIMEOUT)
    challenge = answer.headers.get("www-authenticate", "")
    found = [part.split("=", 1)[1].strip('"') for part in challenge.replace(",", " ").split()
             if part.startswith("resource_metadata=")]
    origin = url.split("/", 3)
    wanted = found or [f"{origin[0]}//{origin[2]}/.well-known/oauth-protected-resource/"
                       f"{origin[3] if len(origin) > 3 else ''}".rstrip("/"),
                       f"{origin[0]}//{origin[2]}/.well-known/oauth-protected-resource"]
    for where in wanted:
        metadata = httpx2.get(where, timeout=STEP_TIMEOUT)
        if metadata.status_code == 200:
            return str(metadata.json()["authorization_servers"][0])
    raise SystemExit(f"no protected resource metadata for {url}")


def _id_jag_lines(url: str, context: dict[str, str], state_dir: str) -> list[str]:
    """Enterprise-Managed Authorization: the IdP's ID token exchanged for an ID-JAG."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    id_token = Path(state_dir) / "id_token"
    id_token.write_text(context["idp_id_token"])
    return ['grant = "id_jag"', f"subject_token_file = {json.dumps(str(id_token))}",
            f"issuer = {json.dumps(authorization_server(url))}",
            f"idp_token_endpoint = {json.dumps(context['idp_token_endpoint'])}",
            f"idp_client_id = {json.dumps(context['idp_client_id'])}"]


def _secret_file(state_dir: str, name: str, text: str) -> str:
    path = Path(state_dir).parent / name
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


def _key_grant_lines(scenario: str, context: dict[str, str], state_dir: str) -> list[str]:
    """``private_key_jwt``, ``jwt_bearer`` and ``dpop`` keys for the scenarios that hand
    out a key or a workload JWT, or want sender-constrained tokens."""
    if "private_key_pem" in context:
        key = _secret_file(state_dir, "client-key.pem", context["private_key_pem"])
        return [f"client_id = {json.dumps(context['client_id'])}",
                'client_auth = "private_key_jwt"', f"private_key_file = {json.dumps(key)}",
                f"signing_algorithm = {json.dumps(context.get('signing_algorithm', 'ES256'))}"]
    if "valid_jwt" in context:
        jwt_file = _secret_file(state_dir, "workload.jwt", context["valid_jwt"])
        return [f"client_id = {json.dumps(context['client_id'])}", 'grant = "jwt_bearer"',
                f"assertion_file = {json.dumps(jwt_file)}"]
    if scenario.startswith("auth/dpop"):
        return ["dpop = true"]
    return []


def _run(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HUB, *args, "-c", str(config)], capture_output=True, text=True,
                          timeout=STEP_TIMEOUT, check=False)


def login(config: Path) -> bool:
    """``mcp-hub login up --no-browser``, following the printed URL like a browser would."""
    proc = subprocess.Popen([*HUB, "login", "up", "--no-browser", "--timeout", "50",
                             "-c", str(config)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if url:
        try:
            httpx2.get(url, follow_redirects=True, timeout=30.0)
        except httpx2.HTTPError as exc:
            print(f"following the authorization URL failed: {exc}", file=sys.stderr)
    code = proc.wait(timeout=STEP_TIMEOUT)
    print(f"login exit {code}", file=sys.stderr)
    return code == 0


def call_tools(config: Path, auth: bool) -> int:
    listed = _run(config, "tools", "--json")
    sys.stderr.write(listed.stderr)
    if listed.returncode != 0:
        return listed.returncode
    names = [t["name"] for t in json.loads(listed.stdout)["tools"] if t["server"] == "up"]
    failures = 0
    for name in names:
        arguments = json.dumps(TOOL_ARGS.get(name, {}))
        result = _run(config, "call", name, "--args", arguments)
        if auth and result.returncode != 0 and "needs a login" in result.stderr + result.stdout:
            sys.stderr.write(result.stderr)
            if login(config):
                result = _run(config, "call", name, "--args", arguments)
        sys.stderr.write(result.stderr)
        print(result.stdout)
        failures += result.returncode != 0
    return 1 if failures else 0


def main() -> int:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="hub-conformance-") as tmp:
        config = Path(tmp) / "servers.toml"
        config.write_text(_toml(url, scenario, context, str(Path(tmp) / "state")))
        auth = scenario.startswith("auth/")
        if auth and not login(config):
            return 1
        return call_tools(config, auth)


if __name__ == "__main__":
    sys.exit(main())
