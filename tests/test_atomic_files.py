"""``replace_file``: the one atomic file replace (config edits, client installs, pins)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_hub.plumbing.atomic_files import replace_file


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_replaces_the_bytes_with_the_mode_asked_and_leaves_nothing_beside(tmp_path: Path) -> None:
    target = tmp_path / "servers.toml"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o640)
    replace_file(target, b"new\n", prefix=".servers.toml.", mode=0o640)
    assert target.read_bytes() == b"new\n"
    assert _mode(target) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["servers.toml"]


def test_pieces_are_written_in_order_and_a_new_file_is_0600(tmp_path: Path) -> None:
    target = tmp_path / "pins.json"
    replace_file(target, [b"{", b'"a": 1', b"}\n"], prefix=".pins-")
    assert target.read_bytes() == b'{"a": 1}\n'
    assert _mode(target) == 0o600


def test_the_replace_is_a_new_file_not_a_write_through_the_old_one(tmp_path: Path) -> None:
    """A reader holding the old file keeps the old bytes (a rename, not an overwrite)."""
    target = tmp_path / "config.json"
    target.write_bytes(b"old")
    with target.open("rb") as reader:
        replace_file(target, b"new", prefix=".config.json.")
        assert reader.read() == b"old"
    assert target.read_bytes() == b"new"


def test_a_failed_write_leaves_the_target_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "servers.toml"
    target.write_bytes(b"old\n")

    def pieces() -> Iterator[bytes]:
        yield b"half"
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        replace_file(target, pieces(), prefix=".servers.toml.")
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["servers.toml"]


def test_a_symlink_at_the_target_is_replaced_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep")
    target = tmp_path / "link.json"
    target.symlink_to(elsewhere)
    replace_file(target, b"new", prefix=".link.json.")
    assert not target.is_symlink() and target.read_bytes() == b"new"
    assert elsewhere.read_bytes() == b"keep"
