"""docs/auth.md, "Tested: oauth2-mock-server": its commands run as written, in a shell,
against the real authorization server and a real hub (only the two port numbers are
changed to free ones)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fixtures_upstream import free_port
from tests.hubtest import ROOT

DOC = (ROOT / "docs" / "auth.md").read_text()
NODE = ROOT / "js" / "node_modules" / ".bin" / "node"


def walkthrough() -> tuple[list[str], str]:
    """The section's shell blocks and its one TOML block."""
    start = DOC.index("### Tested: oauth2-mock-server")
    section = DOC[start:DOC.index("\n### ", start + 10)]
    blocks = re.findall(r"```(sh|toml)\n(.*?)```", section, re.S)
    shell = [body for kind, body in blocks if kind == "sh"]
    (toml,) = [body for kind, body in blocks if kind == "toml"]
    return shell, toml


def test_the_auth_walkthrough_runs_as_written(tmp_path: Path) -> None:
    if not NODE.exists():
        pytest.skip("needs js/node_modules (make setup)")
    shell, toml = walkthrough()
    hub_port, issuer_port = str(free_port()), str(free_port())

    def ports(text: str) -> str:
        return text.replace("8765", hub_port).replace("9400", issuer_port)

    # The repository folder as the walkthrough sees it, with the config file beside it.
    for name in (".venv", "js", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    config_name = re.search(r"^# (\S+\.toml)", toml, re.M)
    assert config_name is not None
    (tmp_path / config_name.group(1)).write_text(ports(toml))
    script = tmp_path / "walkthrough.sh"
    script.write_text(ports("\n".join(shell)))

    proc = subprocess.Popen(["bash", str(script)], cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ})
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err
    assert re.search(r"^HTTP/1\.1 401", out, re.M), out
    assert "resource_metadata=" in out
    assert f'"resource":"http://127.0.0.1:{hub_port}/mcp"' in out.replace(" ", "")
    assert '"serverInfo"' in out and '"protocolVersion":"2025-06-18"' in out.replace(" ", ""), out
