"""The file toolset: read_file, write_file and search_files confined to the roots."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CallToolResult, TextContent

import builtin_tools.file_tools  # noqa: F401 - registers the tools
from mcp_hub.config.model import HubConfig, parse_config
from mcp_hub.pipeline import runtime
from mcp_hub.pipeline.calls import handle_function_call
from mcp_hub.pipeline.context import CallContext
from mcp_hub.registry.tool_registry import registry

pytestmark = pytest.mark.anyio

FILE_TOOLS = {"read_file", "write_file", "search_files"}


def configure(*roots: Path, extra: str = "") -> None:
    listed = ", ".join(json.dumps(str(r)) for r in roots)
    runtime.set_config(parse_config(f"[builtins.file]\nroots = [{listed}]\n{extra}"))
    registry.invalidate_check_fn_cache()


@pytest.fixture(autouse=True)
def _restore_config() -> Iterator[None]:
    yield
    runtime.set_config(HubConfig())
    registry.invalidate_check_fn_cache()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    configure(path)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("top secret\n")
    return path


async def call(name: str, args: dict[str, Any]) -> CallToolResult:
    with anyio.fail_after(10):
        return await handle_function_call(name, args, call=CallContext(tool_name=name))


def texts(result: CallToolResult) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


def body(result: CallToolResult) -> Any:
    return json.loads(texts(result)[0])


# ── availability ──


def test_the_file_tools_are_hidden_while_no_roots_are_configured(tmp_path: Path) -> None:
    runtime.set_config(HubConfig())
    registry.invalidate_check_fn_cache()
    assert not FILE_TOOLS & {d["name"] for d in registry.get_definitions()}
    configure(tmp_path)
    assert {d["name"] for d in registry.get_definitions()} >= FILE_TOOLS


async def test_a_call_without_roots_is_refused() -> None:
    runtime.set_config(HubConfig())
    result = await call("read_file", {"path": "/etc/hostname"})
    assert result.is_error
    assert "no [builtins.file] roots" in texts(result)[0]


def test_every_file_tool_schema_is_strict() -> None:
    for name in FILE_TOOLS:
        entry = registry.get_entry(name)
        assert entry is not None
        schema = entry.schema["inputSchema"]
        assert schema["additionalProperties"] is False
        assert entry.schema["description"]


async def test_unknown_arguments_are_rejected() -> None:
    result = await call("read_file", {"path": "a.txt", "encoding": "latin-1"})
    assert result.is_error


# ── read_file ──


async def test_read_file_returns_the_text_exactly(root: Path) -> None:
    (root / "a.txt").write_text("one\ntwo\n")
    result = await call("read_file", {"path": str(root / "a.txt")})
    assert not result.is_error
    assert texts(result) == ["one\ntwo\n"]


async def test_a_relative_path_resolves_against_the_first_root(root: Path, tmp_path: Path) -> None:
    second = tmp_path / "second"
    second.mkdir()
    configure(root, second)
    (root / "sub").mkdir()
    (root / "sub" / "a.txt").write_text("first root\n")
    (second / "b.txt").write_text("second root\n")
    assert texts(await call("read_file", {"path": "sub/a.txt"})) == ["first root\n"]
    assert texts(await call("read_file", {"path": str(second / "b.txt")})) == ["second root\n"]


async def test_dot_dot_traversal_out_of_the_root_is_refused(root: Path) -> None:
    result = await call("read_file", {"path": "../../etc/passwd"})
    assert result.is_error
    assert "outside the allowed roots" in texts(result)[0]
    absolute = await call("read_file", {"path": "/etc/passwd"})
    assert absolute.is_error


async def test_a_symlink_leading_out_of_the_root_is_refused(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside)
    for path in ("link.txt", "linkdir/secret.txt"):
        result = await call("read_file", {"path": path})
        assert result.is_error
        message = texts(result)[0]
        assert "symlink" in message
        assert "top secret" not in message


async def test_a_symlink_that_stays_inside_the_root_is_followed(root: Path) -> None:
    (root / "real.txt").write_text("real\n")
    (root / "alias.txt").symlink_to(root / "real.txt")
    assert texts(await call("read_file", {"path": "alias.txt"})) == ["real\n"]


async def test_an_empty_file_reads_as_empty_file(root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    assert texts(await call("read_file", {"path": "empty.txt"})) == ["(empty file)"]


async def test_a_binary_file_is_refused_with_a_clear_error(root: Path) -> None:
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    result = await call("read_file", {"path": "image.png"})
    assert result.is_error
    assert "binary" in texts(result)[0]


async def test_a_file_that_is_not_utf8_is_refused_as_binary(root: Path) -> None:
    (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    result = await call("read_file", {"path": "latin1.txt"})
    assert result.is_error
    assert "not valid UTF-8" in texts(result)[0]


async def test_offset_and_limit_select_lines_and_say_where_to_continue(root: Path) -> None:
    (root / "five.txt").write_text("".join(f"line {i}\n" for i in range(1, 6)))
    result = await call("read_file", {"path": "five.txt", "offset": 2, "limit": 2})
    content, note = texts(result)
    assert content == "line 2\nline 3\n"
    assert "lines 2-3 of 5" in note
    assert "offset=4" in note


async def test_an_offset_past_the_end_is_an_error(root: Path) -> None:
    (root / "two.txt").write_text("a\nb\n")
    result = await call("read_file", {"path": "two.txt", "offset": 3})
    assert result.is_error
    assert "past the end" in texts(result)[0]


async def test_reading_stops_at_the_100_kb_cap(root: Path) -> None:
    line = "x" * 99 + "\n"
    (root / "big.txt").write_text(line * 3000)  # 300 KB
    content, note = texts(await call("read_file", {"path": "big.txt"}))
    assert len(content.encode()) <= 100 * 1024
    assert content.startswith(line)
    assert "of 3000" in note
    assert "read limit" in note


async def test_a_cap_inside_a_multibyte_character_does_not_break_decoding(tmp_path: Path) -> None:
    configure(tmp_path, extra="max_read_bytes = 5\n")
    (tmp_path / "accents.txt").write_text("ééééé\n")  # two bytes each
    content, _note = texts(await call("read_file", {"path": "accents.txt"}))
    assert content == "éé"


async def test_reading_a_directory_is_an_error(root: Path) -> None:
    (root / "folder").mkdir()
    result = await call("read_file", {"path": "folder"})
    assert result.is_error and "directory" in texts(result)[0]


async def test_a_missing_file_is_an_error(root: Path) -> None:
    result = await call("read_file", {"path": "nope.txt"})
    assert result.is_error and "No such file" in texts(result)[0]


# ── write_file ──


async def test_write_file_creates_parents_and_returns_bytes_written(root: Path) -> None:
    result = await call("write_file", {"path": "new/deeper/note.txt", "content": "café\n"})
    assert not result.is_error
    data = body(result)
    assert data["bytes_written"] == len("café\n".encode())
    assert data["created"] is True
    assert (root / "new" / "deeper" / "note.txt").read_text() == "café\n"
    again = body(await call("write_file", {"path": "new/deeper/note.txt", "content": "x"}))
    assert again["created"] is False
    assert (root / "new" / "deeper" / "note.txt").read_text() == "x"


async def test_write_file_refuses_a_path_out_of_the_root(root: Path, tmp_path: Path) -> None:
    result = await call("write_file", {"path": "../escaped.txt", "content": "x"})
    assert result.is_error
    assert not (tmp_path / "escaped.txt").exists()


async def test_write_file_refuses_to_write_through_a_symlink_out_of_the_root(
    root: Path, outside: Path
) -> None:
    (root / "linkdir").symlink_to(outside)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    for path in ("linkdir/planted.txt", "link.txt"):
        result = await call("write_file", {"path": path, "content": "pwned"})
        assert result.is_error
    assert not (outside / "planted.txt").exists()
    assert (outside / "secret.txt").read_text() == "top secret\n"


# ── search_files ──


@pytest.fixture
def tree(root: Path) -> Path:
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("import os\n\ndef main():\n    return 1\n")
    (root / "src" / "util.py").write_text("def helper():\n    pass\n")
    (root / "README.md").write_text("# Title\nmain entry point\n")
    (root / ".git").mkdir()
    (root / ".git" / "config.py").write_text("def main(): pass\n")
    (root / "blob.bin").write_bytes(b"main\x00\x01")
    return root


async def test_search_files_finds_names_by_glob(tree: Path) -> None:
    data = body(await call("search_files", {"pattern": "*.py"}))
    paths = [m["path"] for m in data["matches"]]
    assert paths == [str(tree / "src" / "app.py"), str(tree / "src" / "util.py")]
    assert data["truncated"] is False


async def test_search_files_finds_lines_by_content_regex(tree: Path) -> None:
    data = body(await call("search_files", {"content": r"def \w+\(\)"}))
    found = {(Path(m["path"]).name, m["line"]) for m in data["matches"]}
    assert found == {("app.py", 3), ("util.py", 1)}
    hits = body(await call("search_files", {"content": "MAIN", "ignore_case": True,
                                            "pattern": "*.md"}))
    assert [m["text"] for m in hits["matches"]] == ["main entry point"]


async def test_search_files_stops_at_the_limit_and_says_so(tree: Path) -> None:
    data = body(await call("search_files", {"limit": 2}))
    assert data["count"] == 2
    assert data["truncated"] is True
    assert "limit" in data["note"]


async def test_search_files_reports_an_invalid_regex(tree: Path) -> None:
    result = await call("search_files", {"content": "("})
    assert result.is_error and "Invalid regular expression" in texts(result)[0]


async def test_search_files_refuses_a_path_out_of_the_root(tree: Path) -> None:
    result = await call("search_files", {"path": "/etc", "pattern": "passwd"})
    assert result.is_error


async def test_search_files_does_not_list_or_read_links_out_of_the_root(
    tree: Path, outside: Path
) -> None:
    (tree / "leak.txt").symlink_to(outside / "secret.txt")
    (tree / "leakdir").symlink_to(outside)
    names = body(await call("search_files", {"pattern": "leak*"}))
    assert names["matches"] == []
    content = body(await call("search_files", {"content": "secret"}))
    assert content["matches"] == []

