"""Agent Skills (``io.modelcontextprotocol/skills``) through a real hub process.

Two upstreams run :mod:`tests.fixtures.skills_server`: ``alpha`` over stdio,
``beta`` over Streamable HTTP, both serving the same ``skill://`` addresses (their
descriptions end in `` (alpha)`` / `` (beta)``). Clients are the SDK's ``Client``
in both eras, to the hub over stdio and HTTP, the upstreams reached in either era.
The official suite's ``sep-2640-*`` server scenarios run against the fixture
directly and through the hub (marked ``node``); the skills requests' telemetry
spans and the namespace's pure rules close the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

from tests.conformance import run
from tests.erastest import asking_over_http, hub_client, text_of
from tests.hubtest import PY, ROOT, http_hub, hub_env, write_config

pytestmark = pytest.mark.anyio

SKILLS = "io.modelcontextprotocol/skills"
FIXTURE = ["-m", "tests.fixtures.skills_server"]
PDF = "pdf-processing/SKILL.md"
SCENARIOS = ("sep-2640-skills-enumeration", "sep-2640-skills-directory",
             "sep-2640-skills-manifest")
#: (hub transport, client era, upstream era): each axis in both values, in four runs.
COMBOS = [("stdio", "legacy", "2025"), ("stdio", "auto", "auto"),
          ("http", "legacy", "auto"), ("http", "auto", "2025")]


class _Params(types.RequestParams):
    model_config = ConfigDict(extra="allow")


class _Request(types.Request[_Params, str]):
    method: str
    params: _Params


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


async def rpc(client: Client, method: str, params: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """A request the typed client has no method for; its result as sent."""
    with anyio.fail_after(30):
        answer = await client.session.send_request(
            _Request(method=method, params=_Params.model_validate(params or {})), _Answer)
    return dict(answer.model_extra or {})


def _stdio_block(label: str, protocol: str) -> str:
    return (f'[servers.{label}]\ncommand = "{PY}"\n'
            f'args = ["-m", "tests.fixtures.skills_server", "--label", "{label}"]\n'
            f'cwd = "{ROOT}"\nprotocol = "{protocol}"\n')


@asynccontextmanager
async def skills_config(tmp: Path, protocol: str, extra: str = "") -> AsyncIterator[Path]:
    """``alpha`` (stdio) and ``beta`` (HTTP) skills upstreams, spoken to in ``protocol``."""
    async with asking_over_http([*FIXTURE, "--transport", "http", "--label", "beta"],
                                name="beta", extra=f'protocol = "{protocol}"\n') as beta:
        yield write_config(tmp, _stdio_block("alpha", protocol) + beta + extra)


async def _direct_entries(label: str) -> dict[str, dict[str, Any]]:
    """The fixture's own skills/list (a 2026-07-28 client, over stdio), by URI."""
    params = StdioServerParameters(command=PY, args=[*FIXTURE, "--label", label],
                                   cwd=str(ROOT), env=hub_env())
    async with Client(params, mode="auto") as client:
        listed = await rpc(client, "skills/list")
    return {e["uri"]: e for e in listed["skills"]}


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(("transport", "mode", "upstream"), COMBOS)
async def test_skills_of_two_servers_are_namespaced_with_their_digests_untouched(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    direct = {label: await _direct_entries(label) for label in ("alpha", "beta")}
    with anyio.fail_after(120):
        async with skills_config(tmp_path, upstream) as config, \
                hub_client(transport, mode, config, tmp_path) as client:
            if mode == "auto":  # initialize (2025) has no field for extensions
                caps = (await client.session.discover()).capabilities
                assert (caps.extensions or {}).get(SKILLS) == {"directoryRead": True}
            listed = await rpc(client, "skills/list")
            assert "nextCursor" not in listed
            entries = {e["uri"]: e for e in listed["skills"]}
            expected: dict[str, dict[str, Any]] = {}
            for label, own in direct.items():
                for uri, entry in own.items():
                    hub_uri = uri.replace("skill://", f"skill://{label}/", 1)
                    expected[hub_uri] = {**entry, "uri": hub_uri, "resources": [
                        {**f, "uri": f["uri"].replace("skill://", f"skill://{label}/", 1)}
                        for f in entry["resources"]]}
            assert entries == expected  # frontmatter, digest and size as the server sent them
            for label in ("alpha", "beta"):
                entry = entries[f"skill://{label}/{PDF}"]
                assert entry["frontmatter"]["description"].endswith(f"({label})")
                for file in entry["resources"]:  # every file reads back as its entry says
                    read = await client.read_resource(file["uri"])
                    assert [str(c.uri) for c in read.contents] == [file["uri"]]
                    body = text_of(read)
                    assert (_digest(body), len(body.encode())) == (file["digest"], file["size"])
                got = await rpc(client, "skills/get", {"uri": entry["uri"]})
                assert got["skill"] == entry
                children = await rpc(client, "resources/directory/read",
                                     {"uri": f"skill://{label}/pdf-processing"})
                assert {(c["uri"], c["mimeType"]) for c in children["resources"]} == {
                    (f"skill://{label}/{PDF}", "text/markdown"),
                    (f"skill://{label}/pdf-processing/references", "inode/directory"),
                    (f"skill://{label}/pdf-processing/templates", "inode/directory")}
            for method, uri in (("skills/get", f"skill://{PDF}"),
                                ("skills/get", "skill://gamma/pdf-processing/SKILL.md"),
                                ("resources/directory/read", f"skill://alpha/{PDF}")):
                with pytest.raises(MCPError) as refused:
                    await rpc(client, method, {"uri": uri})
                assert refused.value.code == types.INVALID_PARAMS


async def test_a_profile_lists_and_routes_only_its_servers_skills(tmp_path: Path) -> None:
    tiny = (f'[servers.tiny]\ncommand = "{PY}"\n'
            f'args = ["-m", "tests.fixtures_upstream.tiny_server"]\ncwd = "{ROOT}"\n')
    profile = ('[profiles.only-alpha]\ntoolsets = ["mcp-alpha"]\n'
               '[profiles.plain]\ntoolsets = ["mcp-tiny"]\n')
    with anyio.fail_after(120):
        async with skills_config(tmp_path, "auto", tiny + profile) as config, \
                http_hub(config, tmp_path) as hub, \
                Client(f"{hub.base}/p/only-alpha/mcp", mode="auto") as client:
            async with Client(f"{hub.base}/p/plain/mcp", mode="auto") as plain:
                # A profile without skills servers does not advertise the extension.
                caps = (await plain.session.discover()).capabilities
                assert SKILLS not in (caps.extensions or {})
            caps = (await client.session.discover()).capabilities
            assert (caps.extensions or {}).get(SKILLS) == {"directoryRead": True}
            listed = await rpc(client, "skills/list")
            assert {e["uri"] for e in listed["skills"]} == {
                f"skill://alpha/{PDF}", "skill://alpha/acme/billing/refunds/SKILL.md"}
            for method, uri in (("skills/get", f"skill://beta/{PDF}"),
                                ("resources/directory/read", "skill://beta/pdf-processing")):
                with pytest.raises(MCPError) as refused:
                    await rpc(client, method, {"uri": uri})
                assert refused.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize(("transport", "mode", "upstream"), COMBOS)
async def test_a_changed_skill_list_reaches_the_client(
        tmp_path: Path, transport: str, mode: str, upstream: str) -> None:
    heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceListChangedNotification):
            heard.set()

    new = "skill://beta/release-notes/SKILL.md"
    with anyio.fail_after(120):
        async with skills_config(tmp_path, upstream) as config, \
                hub_client(transport, mode, config, tmp_path, message_handler=on_message) as client:
            assert new not in {e["uri"] for e in (await rpc(client, "skills/list"))["skills"]}
            if mode == "auto":
                async with client.listen(resources_list_changed=True) as sub:
                    await client.call_tool("beta_add_skill", {})
                    async for _event in sub:
                        break
            else:
                await client.call_tool("beta_add_skill", {})
                await heard.wait()
            assert new in {e["uri"] for e in (await rpc(client, "skills/list"))["skills"]}


# --------------------------------------------------------------------------- the official suite


@pytest.mark.node
@pytest.mark.skipif(not run.suite_available(run.SUITE_JS_NEXT),
                    reason="conformance suite 0.2 not installed (make setup)")
@pytest.mark.parametrize("upstream", ["2025", "2026"])
async def test_the_suites_skills_scenarios_pass_through_the_hub(upstream: str) -> None:
    with anyio.fail_after(300):
        comparison = await run.fixture_vs_hub(
            suite_js=run.SUITE_JS_NEXT, protocol=upstream, skills=True,
            scenario=",".join(SCENARIOS))
    for name in SCENARIOS:
        direct, hub = comparison.direct.scenarios[name], comparison.hub.scenarios[name]
        assert direct.status == "pass" and direct.failed == 0, (name, direct)
        # Skipped checks count as passing scenarios: every check that passes
        # directly must pass through the hub too.
        assert (hub.status, hub.passed) == ("pass", direct.passed), (name, direct, hub)
    assert comparison.ok, comparison.report()


async def test_skills_requests_have_server_spans_naming_the_uri(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="needs the otel extra")
    from tests.otlp_receiver import otlp_receiver

    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # spans leave every 50 ms
    names = {f"skills/get skill://alpha/{PDF}": f"skill://alpha/{PDF}",
             "resources/directory/read skill://alpha/pdf-processing":
                 "skill://alpha/pdf-processing",
             "skills/list": None}
    with otlp_receiver() as (endpoint, received), anyio.fail_after(120):
        config = write_config(tmp_path, _stdio_block("alpha", "2025")
                              + f'\n[telemetry]\notlp_endpoint = "{endpoint}"\n')
        async with http_hub(config, tmp_path) as hub, \
                Client(hub.mcp_url, mode="legacy") as client:
            await rpc(client, "skills/list")
            await rpc(client, "skills/get", {"uri": f"skill://alpha/{PDF}"})
            await rpc(client, "resources/directory/read", {"uri": "skill://alpha/pdf-processing"})
            await received.wait_for(lambda: set(names) <= {s.name for s in received.spans})
    spans = {s.name: s for s in received.spans if s.name in names}
    for name, uri in names.items():
        assert spans[name].attributes["mcp.method.name"] == name.split(" ")[0]
        assert spans[name].attributes.get("mcp.resource.uri") == uri


# --------------------------------------------------------------------------- the namespace, pure


def test_the_namespace_is_exact_both_ways_and_leaves_content_alone() -> None:
    from mcp_hub.protocol.skills import (
        merged_freshness,
        merged_settings,
        namespaced_entry,
        namespaced_uri,
        split_namespaced,
    )

    for own in ("skill://git-workflow/SKILL.md", "skill://acme/billing/refunds/x.md",
                "ui://app.html"):
        assert split_namespaced(namespaced_uri("s-1.x", own)) == ("s-1.x", own)
    assert namespaced_uri("s", "github://o/r/SKILL.md") == "github://o/r/SKILL.md"
    assert split_namespaced("skill://only") is None
    entry = {"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
             "resources": [{"uri": "skill://a/SKILL.md", "digest": "sha256:" + "0" * 64,
                            "size": 7}], "_meta": {"x": 1}}
    assert namespaced_entry("s", entry) == {
        **entry, "uri": "skill://s/a/SKILL.md",
        "resources": [{"uri": "skill://s/a/SKILL.md", "digest": "sha256:" + "0" * 64, "size": 7}]}
    assert namespaced_entry("s", {**entry, "resources": "dynamic"})["resources"] == "dynamic"
    assert merged_settings([]) is None
    assert merged_settings([{"directoryRead": True}, {}]) == {}
    assert merged_settings([{"directoryRead": True}]) == {"directoryRead": True}
    assert merged_freshness([{"ttlMs": 500, "cacheScope": "public"},
                             {"ttlMs": 200, "cacheScope": "public"}]) == {
        "ttlMs": 200, "cacheScope": "public"}
    assert merged_freshness([{"ttlMs": 500, "cacheScope": "public"}, {}]) == {
        "ttlMs": 0, "cacheScope": "private"}
