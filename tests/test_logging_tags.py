"""Every log line about an upstream names it: ``--log-format json`` lines carry ``server``.

``mcp-hub tools`` runs as a subprocess on a config with the echo upstream and a
broken one (a child that writes colour codes and control characters to stderr
and exits); every line the upstream layer logs, and every relayed stderr line,
must parse as JSON with the right ``server``, and relayed lines must be clean.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.hubtest import PY, ROOT, echo_server_toml, hub_env, write_config

NOISY_CHILD = (
    "import sys; "
    r"sys.stderr.write('\x1b[31mboom\x1b[0m: bad\x07 token\x08\x08\x08\x08\x08ok\u202e!\n'); "
    "sys.exit(3)"
)


def run_tools(config: Path) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [PY, "-m", "mcp_hub", "tools", "--config", str(config),
         "--log-format", "json", "--log-level", "debug"],
        cwd=str(ROOT), env=hub_env(), capture_output=True, text=True, timeout=60, check=False)
    lines = [json.loads(line) for line in proc.stderr.splitlines() if line.strip()]
    return proc.returncode, lines


def test_upstream_log_lines_carry_the_server_name(tmp_path: Path) -> None:
    noisy = (f'[servers.noisy]\ncommand = "{PY}"\n'
             f"args = [\"-c\", {json.dumps(NOISY_CHILD)}]\n")
    config = write_config(tmp_path, echo_server_toml("echo") + noisy,
                          hub=f'state_dir = "{tmp_path / "state"}"\n')
    code, lines = run_tools(config)
    assert code == 0, lines

    upstream = [r for r in lines if r["logger"].startswith("mcp_hub.upstream")]
    assert upstream, lines
    untagged = [r for r in upstream if r.get("server") not in ("echo", "noisy")]
    assert untagged == []
    echo = [r["message"] for r in upstream if r["server"] == "echo"]
    assert any("upstream echo: ready" in m for m in echo)
    assert any(m.startswith("upstream echo: 12 tools") for m in echo)

    relayed = [r for r in upstream if r["logger"] == "mcp_hub.upstream.stderr"]
    assert relayed and {r["server"] for r in relayed} == {"noisy"}
    # Colour codes, the bell, backspaces and the bidi override are gone.
    assert relayed[0]["message"] == "[noisy] boom: bad tokenok!"
    for record in relayed:
        assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in record["message"])
    noisy_lines = [r["message"] for r in upstream if r["server"] == "noisy"]
    assert any("upstream noisy:" in m and "reconnecting" in m for m in noisy_lines)
