"""What a stdio child inherits: the documented list is the code's list, the CA bundles the
machine trusts reach a real child, proxies and mirrors only through ``env``, and the
``npx``/``uvx`` examples of docs/upstreams.md pass what they say."""

from __future__ import annotations

import re

import anyio
import pytest

from mcp_hub.config.model import parse_config
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import ToolRegistry
from mcp_hub.upstream.stdio.prespawn import INHERITED_ENV_VARS
from mcp_hub.upstream.transports import child_environment
from tests.fixtures_upstream import echo_block, running, text_of
from tests.hubtest import ROOT

pytestmark = pytest.mark.anyio

DOC = (ROOT / "docs" / "upstreams.md").read_text()


def section(title: str) -> str:
    start = DOC.index(f"\n### {title}\n")
    end = DOC.index("\n#", start + len(title) + 6)
    return DOC[start:end]


def test_the_documented_list_is_the_inherited_list() -> None:
    rows = [line for line in section("What a child inherits").splitlines()
            if line.startswith("| `")]
    documented = {name for row in rows for name in re.findall(r"`([A-Z_]+)`", row.split("|")[1])}
    assert documented == set(INHERITED_ENV_VARS)


async def test_ca_bundles_reach_the_child_and_proxies_only_through_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", "/etc/ssl/corp-ca.pem")
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", "/etc/ssl/corp-ca.pem")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.invalid:3128")
    monkeypatch.setenv("CORP_MIRROR", "https://mirror.invalid/npm/")
    body = (echo_block("plain")
            + echo_block("passed", env={"HTTPS_PROXY": "${HTTPS_PROXY}",
                                        "npm_config_registry": "${CORP_MIRROR}"}))

    async def env_of(registry: ToolRegistry, tool: str, name: str) -> str:
        result = await registry.dispatch(tool, {"name": name}, call=CallContext())
        return text_of(result)

    with anyio.fail_after(60):
        async with running(body) as (_, registry):
            for tool in ("plain_env", "passed_env"):
                assert await env_of(registry, tool, "SSL_CERT_FILE") == "/etc/ssl/corp-ca.pem"
                assert await env_of(registry, tool, "NODE_EXTRA_CA_CERTS") == "/etc/ssl/corp-ca.pem"
            assert await env_of(registry, "plain_env", "HTTPS_PROXY") == "<unset>"
            assert await env_of(registry, "plain_env", "npm_config_registry") == "<unset>"
            assert await env_of(registry, "passed_env", "HTTPS_PROXY") == (
                "http://user:pw@proxy.invalid:3128")
            assert await env_of(registry, "passed_env", "npm_config_registry") == (
                "https://mirror.invalid/npm/")


def test_the_npx_and_uvx_examples_pass_what_they_say() -> None:
    text = section("CA bundles, proxies and registry mirrors")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert len(blocks) == 2
    environ = {"PATH": "/usr/bin:/bin", "HOME": "/home/me", "HTTPS_PROXY": "http://proxy:3128",
               "NPM_MIRROR": "https://npm.mirror.invalid/", "PYPI_MIRROR": "https://pypi.mirror.invalid/simple",
               "SSL_CERT_FILE": "/etc/ssl/machine.pem", "NODE_EXTRA_CA_CERTS": "/etc/ssl/machine.pem"}
    npx = parse_config(blocks[0], environ=environ).servers["memory"]
    uvx = parse_config(blocks[1], environ=environ).servers["fetch"]
    assert npx.command == "npx" and uvx.command == "uvx"
    npx_env, uvx_env = child_environment(npx, environ), child_environment(uvx, environ)
    assert npx_env["HTTPS_PROXY"] == uvx_env["HTTPS_PROXY"] == "http://proxy:3128"
    assert npx_env["NO_PROXY"] == "localhost,127.0.0.1"
    assert npx_env["npm_config_registry"] == "https://npm.mirror.invalid/"
    assert npx_env["NODE_EXTRA_CA_CERTS"] == "/etc/ssl/machine.pem"   # inherited
    assert uvx_env["UV_DEFAULT_INDEX"] == "https://pypi.mirror.invalid/simple"
    assert uvx_env["SSL_CERT_FILE"] == "/etc/ssl/corp-ca.pem"          # its own beats the hub's
    assert npx_env["HOME"] == "/home/me"
