"""discover_builtin_tools: AST scan, top-level register only, failures isolated."""

from __future__ import annotations

import logging
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_hub.pipeline import discovery
from mcp_hub.pipeline.discovery import discover_builtin_tools, has_top_level_register
from mcp_hub.registry.tool_registry import registry

TOOLSET = "discovery-sample"

TOOL = '''
from mcp_hub.registry.tool_registry import registry

def handler(args, **kw):
    return "ok"

{register}
'''


def tool_source(name: str, wrap: str = "{call}") -> str:
    call = (f'registry.register("{name}", "{TOOLSET}", '
            f'{{"name": "{name}", "inputSchema": {{"type": "object"}}}}, handler)')
    return TOOL.format(register=wrap.format(call=call))


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    yield
    registry.deregister_toolset(TOOLSET)


def write(directory: Path, name: str, source: str) -> None:
    (directory / name).write_text(textwrap.dedent(source), encoding="utf-8")


@pytest.fixture
def tools_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tools"
    d.mkdir()
    write(d, "alpha.py", tool_source("disc_alpha"))
    write(d, "beta.py", tool_source("disc_beta", "if True:\n    ok = {call}"))
    write(d, "gamma.py", tool_source("disc_gamma", "try:\n    {call}\nexcept Exception:\n    pass"))
    write(d, "in_function.py", tool_source("disc_never", "def setup():\n    {call}"))
    write(d, "in_class.py", tool_source("disc_never2", "class T:\n    def m(self):\n        {call}"))
    write(d, "_private.py", tool_source("disc_private"))
    write(d, "__init__.py", "")
    write(d, "broken.py", "import module_that_does_not_exist_xyz\n" + tool_source("disc_broken"))
    write(d, "bad_syntax.py", "registry.register(\n")
    write(d, "no_tool.py", "VALUE = 1\n")
    write(d, "notes.txt", "registry.register()")
    return d


def test_only_files_with_a_top_level_register_call_are_imported(
    tools_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_hub.pipeline.discovery"):
        imported = discover_builtin_tools(tools_dir)
    assert [n.split("_")[-1] for n in imported] == ["alpha", "beta", "gamma"]
    names = registry.toolsets()[TOOLSET]
    assert names == ["disc_alpha", "disc_beta", "disc_gamma"]


def test_an_import_failure_is_a_warning_and_the_other_tools_still_load(
    tools_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mcp_hub.pipeline.discovery"):
        imported = discover_builtin_tools(tools_dir)
    assert len(imported) == 3
    assert "broken.py failed to import" in caplog.text
    assert "ModuleNotFoundError" in caplog.text
    assert "bad_syntax.py skipped" in caplog.text
    assert not any("broken" in m for m in sys.modules if m.startswith("mcp_hub_tools_"))


def test_discovering_twice_does_not_import_again(tools_dir: Path) -> None:
    first = discover_builtin_tools(tools_dir)
    generation = registry.generation
    assert discover_builtin_tools(tools_dir) == first
    assert registry.generation == generation


def test_a_register_call_inside_a_function_does_not_count() -> None:
    assert has_top_level_register("registry.register('a', 'b', {}, f)")
    assert has_top_level_register("x: bool = mcp_hub.registry.tool_registry.registry.register()")
    assert has_top_level_register("with lock:\n    registry.register()")
    assert not has_top_level_register("def f():\n    registry.register()")
    assert not has_top_level_register("async def f():\n    registry.register()")
    assert not has_top_level_register("other.register()")
    assert not has_top_level_register("register()")
    assert not has_top_level_register("registry.register")


def test_the_default_directory_is_the_builtin_tools_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkg = tmp_path / "fake_builtin_pkg_for_discovery"
    pkg.mkdir()
    write(pkg, "__init__.py", "")
    write(pkg, "clock.py", tool_source("disc_clock"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(discovery, "_PACKAGE", "fake_builtin_pkg_for_discovery")
    try:
        assert discover_builtin_tools() == ["fake_builtin_pkg_for_discovery.clock"]
        # Scanning the package directory explicitly imports under the package too.
        assert discover_builtin_tools(pkg) == ["fake_builtin_pkg_for_discovery.clock"]
        assert registry.get_entry("disc_clock") is not None
    finally:
        for name in [m for m in sys.modules if m.startswith("fake_builtin_pkg_for_discovery")]:
            del sys.modules[name]


def test_a_missing_package_or_directory_discovers_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(discovery, "_PACKAGE", "no_such_builtin_package_xyz")
    with caplog.at_level(logging.WARNING, logger="mcp_hub.pipeline.discovery"):
        assert discover_builtin_tools() == []
        assert discover_builtin_tools(tmp_path / "missing") == []
    assert "does not exist" in caplog.text
