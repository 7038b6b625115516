"""The one door to private insides (mcp_hub/compat/): every hook present on the
pinned libraries, a changed one named exactly, the hub refusing to start or
turning a feature off with one warning, and no private name used elsewhere."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.shared.jsonrpc_dispatcher as jsonrpc_dispatcher
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mcp_hub import compat
from mcp_hub.compat import hooks
from mcp_hub.config.model import load_config
from mcp_hub.downstream import runners
from mcp_hub.errors import IncompatibleLibrary
from tests.hubtest import PY, ROOT, echo_server_toml, hub_env, write_config

PACKAGE = ROOT / "mcp_hub"
DOOR = PACKAGE / "compat"
#: Libraries whose private names only the door may use.
GUARDED = ("mcp", "mcp_types", "jwt", "opentelemetry", "uvicorn", "starlette", "anyio")
#: SDK classes the hub subclasses: private names used on ``self`` inside them are theirs.
SDK_BASES = {"StreamableHTTPSessionManager", "HookedSessionManager", "StreamableHTTPServerTransport",
             "ClientSession"}
#: Private names of other libraries' objects the hub relies on (all in the door).
PRIVATE = {
    "_handle_stateful_request", "_admit_session", "_serve_opening_request", "_discard_session",
    "_server_instances", "_session_owners", "_session_creation_lock", "_lifespan_state",
    "_requests_in_flight",
    "_idle_timeout", "_request_streams", "_read_stream_writer", "_jwk_data",
    "_preferred_temporality", "_preferred_aggregation", "_stamp", "_dispatcher", "_allocate_id",
    "_connection", "_later_revision_fields", "_Pending", "_negotiate_initialize",
}


@pytest.fixture(autouse=True)
def fresh_checks() -> Iterator[None]:
    hooks._feature_problems.cache_clear()
    yield
    hooks._feature_problems.cache_clear()


def test_every_hook_is_present_on_the_installed_libraries() -> None:
    assert compat.check_hooks() == []
    assert all(compat.feature_ok(h.feature) for h in compat.HOOKS)


def test_a_removed_method_is_named_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(StreamableHTTPSessionManager, "_admit_session")
    problems = [str(p) for p in compat.check_hooks()]
    assert problems == ["mcp.server.streamable_http_manager:StreamableHTTPSessionManager._admit_session: "
                        f"no such method (needed by {hooks.HTTP_SESSIONS})"]


def test_a_changed_signature_is_named_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    async def renamed(self: Any, sid: str, transport: Any, reason: str) -> None: ...
    monkeypatch.setattr(StreamableHTTPSessionManager, "_discard_session", renamed)
    problems = [str(p) for p in compat.check_hooks()]
    assert len(problems) == 1
    assert "StreamableHTTPSessionManager._discard_session: parameters are ('sid', 'transport', " \
           "'reason'), expected ('session_id', 'transport')" in problems[0]


def test_a_missing_attribute_of_a_fresh_instance_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    original = StreamableHTTPSessionManager.__init__

    def without_owners(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        del self._session_owners

    monkeypatch.setattr(StreamableHTTPSessionManager, "__init__", without_owners)
    assert [p.hook.name.rsplit(".", 1)[1] for p in compat.check_hooks()] == ["_session_owners"]


def test_a_required_hook_of_a_feature_in_use_stops_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(StreamableHTTPSessionManager, "_serve_opening_request")
    with pytest.raises(IncompatibleLibrary, match=r"_serve_opening_request: no such method"):
        compat.enforce({hooks.HTTP_SESSIONS})
    compat.enforce({hooks.STDIO_SERVER})  # not in use: no error


def test_an_optional_hook_turns_its_feature_off_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delattr(jsonrpc_dispatcher, "_Pending")
    with caplog.at_level("WARNING", logger="mcp_hub.compat"):
        compat.enforce({hooks.HTTP_SESSIONS, hooks.STDIO_SERVER})
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "_Pending" in warnings[0] and f"{hooks.LEAN_CALL} is off" in warnings[0]
    assert not compat.feature_ok(hooks.LEAN_CALL)
    assert compat.feature_ok(hooks.HTTP_SESSIONS)


def _launcher(tmp: Path, patch: str) -> Path:
    """A script that changes the installed SDK as a release might, then runs the hub."""
    script = tmp / "patched_hub.py"
    script.write_text(textwrap.dedent(patch) + textwrap.dedent("""
        import runpy, sys
        sys.argv[0] = "mcp-hub"
        runpy.run_module("mcp_hub", run_name="__main__")
    """))
    return script


def test_the_hub_refuses_to_serve_http_when_a_session_hook_is_gone(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml())
    script = _launcher(tmp_path, """
        import mcp.server.streamable_http_manager as m
        del m.StreamableHTTPSessionManager._admit_session
    """)
    proc = subprocess.run([PY, str(script), "serve", "--config", str(config), "--transport", "http",
                           "--port", "0"], cwd=ROOT, env=hub_env(), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0, proc.stderr
    assert "StreamableHTTPSessionManager._admit_session: no such method" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.anyio
async def test_the_hub_serves_with_the_lean_call_off_and_says_so_once(tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml())
    # A release whose pending entries carry one more field: the SDK itself works on,
    # the lean call (which stands in for those entries) must not.
    script = _launcher(tmp_path, """
        import dataclasses
        import mcp.shared.jsonrpc_dispatcher as d
        d._Pending.__dataclass_fields__ = {**d._Pending.__dataclass_fields__,
                                            "deadline": dataclasses.field()}
    """)
    errlog = tmp_path / "stderr.log"
    params = StdioServerParameters(command=PY, args=[str(script), "serve", "--config", str(config)],
                                   cwd=str(ROOT), env=hub_env())
    with anyio.fail_after(90), open(errlog, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(3):
                result = await session.call_tool("echo_echo", {"text": "hi"})
                assert not result.is_error, (result, errlog.read_text())
                assert result.content[0].text == "hi"  # type: ignore[union-attr]
    stderr = errlog.read_text()
    assert stderr.count(f"{hooks.LEAN_CALL} is off") == 1, stderr


def test_a_feature_of_a_config_part_not_in_use_is_not_probed(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    changed = [dataclasses.replace(h, probe=lambda: "changed") if h.feature == hooks.OTLP_DURATIONS
               else h for h in hooks.HOOKS]
    monkeypatch.setattr(hooks, "HOOKS", tuple(changed))
    with caplog.at_level("WARNING", logger="mcp_hub.compat"):
        compat.enforce({hooks.STDIO_SERVER})
        assert caplog.records == []
        compat.enforce({hooks.STDIO_SERVER, hooks.OTLP_DURATIONS})
    assert [r.getMessage() for r in caplog.records] == [
        f"opentelemetry MetricExporter._preferred_temporality: changed (needed by "
        f"{hooks.OTLP_DURATIONS}): {hooks.OTLP_DURATIONS} is off"]


def test_a_config_with_telemetry_checks_the_otlp_hooks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[set[str]] = []
    monkeypatch.setattr(compat, "enforce", lambda in_use: checked.append(set(in_use)))
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    plain = load_config(write_config(tmp_path, echo_server_toml()))
    traced = load_config(write_config(tmp_path, echo_server_toml()
                                      + '\n[telemetry]\notlp_endpoint = "http://127.0.0.1:4318"\n'))
    runners.check_libraries(plain, transport="stdio")
    runners.check_libraries(traced, transport="stdio")
    assert [hooks.OTLP_DURATIONS in c for c in checked] == [False, True]


#: Libraries only a config part needs (OTLP export and what it pulls in; the content
#: search of the file tools): a plain stdio hub never imports them, not even to probe a hook.
NOT_LOADED_BY_A_PLAIN_STDIO_HUB = (
    "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "google.protobuf",
    "requests", "urllib3", "regex",
)


@pytest.mark.anyio
async def test_a_plain_stdio_hub_does_not_import_the_libraries_of_unused_features(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, echo_server_toml())
    loaded = tmp_path / "modules.txt"
    script = _launcher(tmp_path, f"""
        import atexit, sys
        atexit.register(lambda: open({str(loaded)!r}, "w").write("\\n".join(sorted(sys.modules))))
    """)
    params = StdioServerParameters(command=PY, args=[str(script), "serve", "--config", str(config)],
                                   cwd=str(ROOT), env=hub_env())
    with anyio.fail_after(90), open(tmp_path / "stderr.log", "w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("echo_echo", {"text": "hi"})
            assert not result.is_error, result
    modules = set(loaded.read_text().split("\n"))
    assert "mcp_hub.downstream.runners" in modules  # the hub served from this process
    assert [m for m in NOT_LOADED_BY_A_PLAIN_STDIO_HUB if m in modules] == []


# ---------------------------------------------------------------- the source stays behind the door
def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "builtin_tools").rglob("*.py")]):
        if DOOR not in path.parents:
            yield path, ast.parse(path.read_text(), str(path))


def _guarded(module: str) -> bool:
    return module.split(".")[0] in GUARDED


def _strays(path: Path, tree: ast.Module) -> Iterator[str]:
    where = path.relative_to(ROOT)
    sdk_classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and any(
        isinstance(b, ast.Name) and b.id in SDK_BASES for b in n.bases)]
    inside_sdk_class = {id(n) for c in sdk_classes for n in ast.walk(c)}
    # Names bound by ``from <guarded library> import X``: ``X._private`` is theirs.
    theirs = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
              and n.module and _guarded(n.module) for a in n.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in theirs and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            yield f"{where}:{node.lineno}: uses private {node.value.id}.{node.attr}"
        if isinstance(node, ast.ImportFrom) and node.module and _guarded(node.module):
            if any(part.startswith("_") for part in node.module.split(".")):
                yield f"{where}:{node.lineno}: imports private module {node.module}"
            yield from (f"{where}:{node.lineno}: imports private name {a.name} from {node.module}"
                        for a in node.names if a.name.startswith("_"))
        elif isinstance(node, ast.Import):
            yield from (f"{where}:{node.lineno}: imports private module {a.name}" for a in node.names
                        if _guarded(a.name) and any(p.startswith("_") for p in a.name.split(".")))
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own or id(node) in inside_sdk_class:
                yield f"{where}:{node.lineno}: uses private {node.attr}"
        elif isinstance(node, ast.Constant) and node.value in PRIVATE:
            yield f"{where}:{node.lineno}: names private {node.value}"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in PRIVATE \
                and id(node) in inside_sdk_class:
            yield f"{where}:{node.lineno}: overrides private {node.name}"


def test_no_module_outside_the_door_touches_private_names() -> None:
    strays = [s for path, tree in _modules() for s in _strays(path, tree)]
    assert strays == []


def test_the_scan_finds_a_stray() -> None:
    source = textwrap.dedent("""
        from mcp.shared._context_streams import create_context_streams
        from mcp.client.session import _later_revision_fields
        class M(StreamableHTTPSessionManager):
            def _admit_session(self, requestor): return self._server_instances
        def f(manager):
            return manager._session_owners, getattr(manager, "_requests_in_flight", 0)
    """)
    strays = list(_strays(ROOT / "mcp_hub" / "x.py", ast.parse(source)))
    assert len(strays) == 6, strays


def test_the_scan_finds_a_private_member_of_any_library_class() -> None:
    """Not only the names listed in PRIVATE: any ``_member`` of a name imported from a
    guarded library (a static method, a class attribute) is the library's."""
    source = textwrap.dedent("""
        from mcp.server.runner import ServerRunner as Runner
        def f(params):
            return Runner._some_new_private(params), Runner.__name__
    """)
    strays = list(_strays(ROOT / "mcp_hub" / "x.py", ast.parse(source)))
    assert strays == ["mcp_hub/x.py:4: uses private Runner._some_new_private"], strays


def test_one_hub_class_derives_from_the_doors_session_manager() -> None:
    """The hub's HTTP sessions are one class: pool, resume and replica sessions are parts
    it owns (mcp_hub.downstream.http.session_manager), not bases mixed together."""
    import mcp_hub.downstream.http.app  # noqa: F401  (imports every session module)
    from mcp_hub.compat.sdk_http import HookedSessionManager

    def below(cls: type) -> list[type]:
        return [c for sub in cls.__subclasses__() for c in (sub, *below(sub))]

    hub_classes = {f"{c.__module__}.{c.__qualname__}" for c in below(HookedSessionManager)
                   if c.__module__.startswith("mcp_hub.")}
    assert hub_classes == {"mcp_hub.downstream.http.session_manager.HubSessionManager"}
