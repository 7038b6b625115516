"""``@modelcontextprotocol/server-everything`` through the hub, compared with talking to it directly.

Every test opens two client sessions with the same callbacks: one straight to
server-everything, one to a hub that has server-everything as its only upstream
(``prefix = ""``, so names are unchanged). Each runs twice: stdio client → stdio
hub → stdio upstream, and Streamable HTTP client → HTTP hub → server-everything
in its ``streamableHttp`` mode. What may legitimately differ between the two
answers (time of day, session ids, the server's environment) is normalised in
:func:`tests.everything_cases.normalise`, which documents each case.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from bench.common import free_port
from tests.everything_cases import (
    PROGRESS_TOOLS,
    PROMPT_ARGS,
    Client,
    args_for_tool,
    normalise,
    plain,
)
from tests.hubtest import (
    EVERYTHING,
    EVERYTHING_MARKS,
    ROOT,
    everything_http,
    everything_toml,
    http_hub,
    http_session,
    hub_env,
    stdio_hub,
    write_config,
)

pytestmark = [*EVERYTHING_MARKS]

TRANSPORTS = ["stdio", "http"]

#: Simulated log lines of ``toggle-simulated-logging`` (one of eight levels).
SIMULATED_LOG = re.compile(r"^(Debug|Info|Notice|Warning|Error|Critical|Emergency)-level message"
                           r"|^Alert level-message")


# ── processes and sessions ────────────────────────────────────────────────────

@asynccontextmanager
async def _direct_stdio(client: Client) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(EVERYTHING), args=["stdio"], cwd=str(ROOT),
                                   env=hub_env())
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, **client.kwargs()) as session,
    ):
        await session.initialize()
        yield session


@asynccontextmanager
async def pair(transport: str, tmp_path: Path, direct: Client, hub: Client
               ) -> AsyncIterator[tuple[ClientSession, ClientSession]]:
    """A direct session and a session through the hub, over ``transport``."""
    if transport == "stdio":
        config = write_config(tmp_path, everything_toml("stdio"))
        async with _direct_stdio(direct) as d, stdio_hub(config, **hub.kwargs()) as h:
            yield d, h
        return
    async with everything_http(tmp_path) as url:
        config = write_config(tmp_path, everything_toml(url))
        async with (
            http_session(url, **direct.kwargs()) as d,
            http_hub(config, tmp_path) as running,
            http_session(running.mcp_url, **hub.kwargs()) as h,
        ):
            yield d, h


async def _tool_names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def _hub_lists_all_of(hub: ClientSession, names: set[str]) -> set[str]:
    """Poll the hub's tool list (bounded by the caller) until it holds ``names``."""
    while True:
        listed = await _tool_names(hub)
        if names <= listed:
            return listed
        await anyio.sleep(0.05)


async def _roots_reached_upstream(direct: ClientSession, hub: ClientSession, *,
                                  same_process: bool) -> None:
    """Wait (bounded by the caller) until the upstream behind the hub knows this client's
    roots. Directly the server asks its own client; through the hub it first asked the hub
    when the hub connected, with no client yet, and learns the client's roots from the
    ``roots/list_changed`` the hub sends once this client's handshake is done."""
    want = normalise((await _outcome(direct, "get-roots-list", {}))[0], same_process=same_process)
    while normalise((await _outcome(hub, "get-roots-list", {}))[0],
                    same_process=same_process) != want:
        await anyio.sleep(0.05)


async def _outcome(session: ClientSession, name: str, args: dict[str, Any]
                   ) -> tuple[Any, list[tuple[float, float | None, str | None]]]:
    """A call's result (or JSON-RPC error) as plain JSON, with the progress it reported."""
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    try:
        result = await session.call_tool(
            name, args, progress_callback=on_progress if name in PROGRESS_TOOLS else None)
    except MCPError as exc:
        return {"error": plain(exc.error)}, progress
    return plain(result), progress


# ── tools ─────────────────────────────────────────────────────────────────────

@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool_is_listed_and_answers_through_the_hub_as_it_does_directly(
    transport: str, tmp_path: Path
) -> None:
    """All tools server-everything lists (discovered, not hard-coded) are listed by the
    hub with the same definition and answer every call the same: content,
    structuredContent, isError, or the same JSON-RPC error. Progress of the long
    operation, and the sampling, elicitation and roots requests some tools make,
    go through the hub to this client.
    """
    direct_client, hub_client = Client(), Client()
    same_process = transport == "http"
    with anyio.fail_after(90):
        async with pair(transport, tmp_path, direct_client, hub_client) as (direct, hub):
            tools = (await direct.list_tools()).tools
            names = {t.name for t in tools}
            # Registered only for clients with sampling, elicitation and roots.
            assert {"trigger-sampling-request", "trigger-elicitation-request",
                    "trigger-url-elicitation", "get-roots-list"} <= names
            await _hub_lists_all_of(hub, names)
            await _roots_reached_upstream(direct, hub, same_process=same_process)
            listed = {t.name: plain(t) for t in (await hub.list_tools()).tools}
            for tool in tools:
                assert listed[tool.name] == plain(tool), tool.name

            differences: list[str] = []
            for tool in tools:
                for args in args_for_tool(tool):
                    want, want_progress = await _outcome(direct, tool.name, args)
                    got, got_progress = await _outcome(hub, tool.name, args)
                    want = normalise(want, same_process=same_process)
                    got = normalise(got, same_process=same_process)
                    if got != want:
                        differences.append(f"{tool.name}({args}):\n  direct {want}\n  hub    {got}")
                    if got_progress != want_progress:
                        differences.append(f"{tool.name} progress: direct {want_progress}, "
                                           f"hub {got_progress}")
                    if tool.name in PROGRESS_TOOLS:
                        steps = int(args["steps"])
                        assert [p[:2] for p in got_progress] == [
                            (float(i), float(steps)) for i in range(1, steps + 1)]
            assert not differences, "\n".join(differences)

    # The server asked both clients the same questions; the hub passed them on unchanged.
    assert hub_client.sampled == direct_client.sampled
    assert [s["messages"][0]["content"]["text"] for s in hub_client.sampled] == [
        "Resource trigger-sampling-request context: Say hi to the hub"]
    assert hub_client.elicited == direct_client.elicited
    assert [e.get("mode", "form") for e in hub_client.elicited] == ["form", "url"]
    assert hub_client.roots_asked >= 1 and direct_client.roots_asked >= 1


async def test_tool_definitions_through_the_hub_keep_their_execution_field(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with pair("stdio", tmp_path, Client(), Client()) as (direct, hub):
            want = {t.name: plain(t).get("execution") for t in (await direct.list_tools()).tools}
            await _hub_lists_all_of(hub, set(want))
            got = {t.name: plain(t).get("execution") for t in (await hub.list_tools()).tools}
    assert want["simulate-research-query"] == {"taskSupport": "required"}
    assert {name: got[name] for name in want} == want


async def test_a_url_elicitation_required_error_reaches_the_client_unchanged(
    tmp_path: Path,
) -> None:
    args = {"url": "https://example.com/authorize", "errorPath": True}
    with anyio.fail_after(60):
        async with pair("stdio", tmp_path, Client(), Client()) as (direct, hub):
            want, _ = await _outcome(direct, "trigger-url-elicitation", args)
            await _hub_lists_all_of(hub, {"trigger-url-elicitation"})
            got, _ = await _outcome(hub, "trigger-url-elicitation", args)
    assert want["error"]["code"] == -32042
    assert want["error"]["data"]["elicitations"][0]["mode"] == "url"
    # The prerequisite's elicitationId is a fresh UUID on each side.
    assert normalise(got, same_process=False) == normalise(want, same_process=False)


# ── prompts, resources, completions ───────────────────────────────────────────

async def _prompt(session: ClientSession, name: str, args: dict[str, str]) -> Any:
    try:
        return normalise(plain(await session.get_prompt(name, args)), same_process=True)
    except MCPError as exc:
        return {"error": plain(exc.error)}


async def _read(session: ClientSession, uri: str) -> Any:
    try:
        return normalise(plain(await session.read_resource(uri)), same_process=True)
    except MCPError as exc:
        return {"error": plain(exc.error)}


COMPLETABLE = types.PromptReference(type="ref/prompt", name="completable-prompt")
RESOURCE_PROMPT = types.PromptReference(type="ref/prompt", name="resource-prompt")
TEXT_TEMPLATE = types.ResourceTemplateReference(
    type="ref/resource", uri="demo://resource/dynamic/text/{resourceId}")
#: (reference, argument, context arguments, the values server-everything suggests)
COMPLETIONS: list[tuple[Any, dict[str, str], dict[str, str] | None, list[str]]] = [
    (COMPLETABLE, {"name": "department", "value": "S"}, None, ["Sales", "Support"]),
    (COMPLETABLE, {"name": "name", "value": ""}, {"department": "Engineering"},
     ["Alice", "Bob", "Charlie"]),
    (COMPLETABLE, {"name": "name", "value": "E"}, {"department": "Sales"}, ["Eve"]),
    (RESOURCE_PROMPT, {"name": "resourceType", "value": "B"}, None, ["Blob"]),
    (TEXT_TEMPLATE, {"name": "resourceId", "value": "12"}, None, ["12"]),
    (TEXT_TEMPLATE, {"name": "resourceId", "value": "x"}, None, []),
]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_prompts_resources_templates_and_completions_through_the_hub_equal_direct(
    transport: str, tmp_path: Path
) -> None:
    with anyio.fail_after(60):
        async with pair(transport, tmp_path, Client(), Client()) as (direct, hub):
            # Prompts: the same list (prefix "" keeps the names), the same messages.
            prompts = (await direct.list_prompts()).prompts
            assert {p.name for p in prompts} >= set(PROMPT_ARGS)
            assert plain(await hub.list_prompts())["prompts"] == [plain(p) for p in prompts]
            for prompt in prompts:
                # A prompt added later gets a string for each required argument.
                args = PROMPT_ARGS.get(prompt.name) or {
                    a.name: "mcp-hub" for a in prompt.arguments or [] if a.required}
                want = await _prompt(direct, prompt.name, args)
                assert "error" not in want, (prompt.name, want)
                assert await _prompt(hub, prompt.name, args) == want, prompt.name
            bad = {"resourceType": "Video", "resourceId": "1"}
            want = await _prompt(direct, "resource-prompt", bad)
            assert "error" in want
            assert await _prompt(hub, "resource-prompt", bad) == want

            # Resources and templates: the same lists, the same contents.
            resources = plain(await direct.list_resources())["resources"]
            assert resources, "server-everything lists its static documents"
            assert plain(await hub.list_resources())["resources"] == resources
            templates = plain(await direct.list_resource_templates())["resourceTemplates"]
            assert {t["uriTemplate"] for t in templates} >= {
                "demo://resource/dynamic/text/{resourceId}",
                "demo://resource/dynamic/blob/{resourceId}"}
            assert plain(await hub.list_resource_templates())["resourceTemplates"] == templates
            uris = [r["uri"] for r in resources] + [
                "demo://resource/dynamic/text/1", "demo://resource/dynamic/blob/2",
                "demo://resource/dynamic/text/42"]
            for uri in uris:
                want = await _read(direct, uri)
                assert "error" not in want, (uri, want)
                assert await _read(hub, uri) == want, uri
            want = await _read(direct, "demo://resource/dynamic/text/0")
            assert "error" in want
            assert await _read(hub, "demo://resource/dynamic/text/0") == want

            # completion/complete for prompt arguments and template variables.
            assert direct.server_capabilities is not None
            assert direct.server_capabilities.completions is not None
            for ref, argument, context, values in COMPLETIONS:
                want = plain(await direct.complete(ref, argument, context))
                assert want["completion"]["values"] == values
                assert plain(await hub.complete(ref, argument, context)) == want, argument


async def test_requests_right_after_connecting_wait_for_a_slow_upstream(tmp_path: Path) -> None:
    """A client may get a prompt or read a resource it knows from an earlier session
    without listing first; while the hub's upstream is still starting (within
    ``startup_timeout``) the answer must wait for it, as tools/call does."""
    slow = f'command = "/bin/sh"\nargs = ["-c", "sleep 1 && exec {EVERYTHING} stdio"]\n'
    config = write_config(tmp_path, f'[servers.ev]\n{slow}prefix = ""\n')
    with anyio.fail_after(60):
        async with stdio_hub(config) as hub:
            prompt = await _prompt(hub, "simple-prompt", {})
            read = await _read(hub, "demo://resource/dynamic/text/1")
            templates = plain(await hub.list_resource_templates())["resourceTemplates"]
            try:
                completion = plain(await hub.complete(*COMPLETIONS[0][:2]))
            except MCPError as exc:
                completion = {"error": plain(exc.error)}
    assert "error" not in prompt, prompt
    assert "error" not in read, read
    assert len(templates) == 2, templates
    assert completion.get("completion", {}).get("values") == ["Sales", "Support"], completion


# ── notifications: logging, subscriptions, list_changed ───────────────────────

@contextmanager
def _handshake_era() -> Iterator[None]:
    """logging/setLevel and resources/(un)subscribe are deprecated from the 2026-07-28
    era on; the handshake era that server-everything and the hub speak has them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


async def _simulated_log(session: ClientSession, client: Client) -> str:
    """Start simulated logging, wait for one line, stop it again."""
    started = plain(await session.call_tool("toggle-simulated-logging", {}))
    assert "Started simulated" in started["content"][0]["text"]
    await client.until(lambda: any(SIMULATED_LOG.match(str(p.data)) for p in client.logs))
    stopped = plain(await session.call_tool("toggle-simulated-logging", {}))
    assert "Stopped simulated" in stopped["content"][0]["text"]
    return next(str(p.data) for p in client.logs if SIMULATED_LOG.match(str(p.data)))


async def _subscribed_update(session: ClientSession, client: Client, uri: str) -> str:
    """Subscribe to ``uri`` and switch simulated updates on until one arrives; returns
    the info log line server-everything writes for the subscribe request."""
    with _handshake_era():
        await session.subscribe_resource(uri)
    await client.until(lambda: any("Subscribe" in str(p.data) for p in client.logs))
    await session.call_tool("toggle-subscriber-updates", {})
    await client.until(lambda: any(
        str(n.params.uri) == uri for n in client.of_type(types.ResourceUpdatedNotification)))
    await session.call_tool("toggle-subscriber-updates", {})
    with _handshake_era():
        await session.unsubscribe_resource(uri)
    return next(str(p.data) for p in client.logs if "Subscribe" in str(p.data))


async def _new_session_resource(session: ClientSession, client: Client, name: str) -> Any:
    """gzip-file-as-resource registers ``demo://resource/session/<name>``: wait for the
    resources list_changed after which it is listed, then read it."""
    uri = f"demo://resource/session/{name}"
    assert uri not in {r.uri for r in (await session.list_resources()).resources}
    seen = len(client.of_type(types.ResourceListChangedNotification))
    link = plain(await session.call_tool(
        "gzip-file-as-resource",
        {"name": name, "data": "data:text/plain,mcp-hub", "outputType": "resourceLink"}))
    assert link["content"][0]["uri"] == uri
    # Notifications about earlier changes may be in flight: re-list on each one
    # until the new resource is there.
    while True:
        seen = await client.more_of(types.ResourceListChangedNotification, seen)
        listed = {r.uri: plain(r) for r in (await session.list_resources()).resources}
        if uri in listed:
            return listed[uri], await _read(session, uri)


async def _notifications(session: ClientSession, client: Client, uri: str) -> dict[str, Any]:
    with _handshake_era():
        await session.set_logging_level("debug")
    return {
        "log": await _simulated_log(session, client),
        "subscribed": await _subscribed_update(session, client, uri),
        "added": await _new_session_resource(session, client, "added.txt.gz"),
    }


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_log_messages_resource_updates_and_resource_list_changes_reach_the_client(
    transport: str, tmp_path: Path
) -> None:
    """Through the hub, as directly: after logging/setLevel the simulated log lines
    arrive; a subscribed resource gets notifications/resources/updated (and nothing
    else does); a resource the server adds arrives as resources/list_changed."""
    uri = "demo://resource/static/document/features.md"
    direct_client, hub_client = Client(), Client()
    with anyio.fail_after(60):
        async with pair(transport, tmp_path, direct_client, hub_client) as (direct, hub):
            caps = hub.server_capabilities
            assert caps is not None and caps.resources is not None and caps.resources.subscribe
            assert caps.logging is not None
            # One after the other: over HTTP both sessions share the server's
            # registry of session resources, and the second registration of a
            # name replaces the first.
            want = await _notifications(direct, direct_client, uri)
            got = await _notifications(hub, hub_client, uri)
    # The level of a simulated line is random; its wording and session suffix are not.
    assert SIMULATED_LOG.match(got["log"])
    assert ("SessionId" in got["log"]) == ("SessionId" in want["log"])
    assert normalise(got["subscribed"], same_process=True) == normalise(
        want["subscribed"], same_process=True)
    assert f"Received Subscribe Resource request for URI: {uri}" in got["subscribed"]
    for client in (direct_client, hub_client):
        updated = {str(n.params.uri) for n in client.of_type(types.ResourceUpdatedNotification)}
        assert updated == {uri}
    assert got["added"] == want["added"]
    assert want["added"][1]["contents"][0]["mimeType"] == "application/gzip"


async def test_tools_of_an_upstream_that_comes_up_later_reach_the_client_as_list_changed(
    tmp_path: Path,
) -> None:
    """server-everything changes its tool list only as a session starts (the tools that
    depend on client capabilities register then), and has no prompt that changes at
    all. Through the hub a connected client sees the upstream's tools arrive with
    ``tools/list_changed`` when the upstream comes up after the client connected."""
    port = free_port()
    config = write_config(tmp_path, everything_toml(f"http://127.0.0.1:{port}/mcp"))
    direct_client, hub_client = Client(), Client()
    with anyio.fail_after(60):
        async with (
            http_hub(config, tmp_path) as running,
            http_session(running.mcp_url, **hub_client.kwargs()) as hub,
        ):
            assert "echo" not in await _tool_names(hub)
            seen = len(hub_client.of_type(types.ToolListChangedNotification))
            async with (
                everything_http(tmp_path, port) as url,
                http_session(url, **direct_client.kwargs()) as direct,
            ):
                want = await _tool_names(direct)
                while True:
                    seen = await hub_client.more_of(types.ToolListChangedNotification, seen)
                    if want <= await _tool_names(hub):
                        break
                echoed = plain(await hub.call_tool("echo", {"message": "late"}))
    assert echoed["content"][0]["text"] == "Echo: late"
    assert "get-roots-list" in want  # a capability-dependent tool made it through
