"""``mcp-hub call`` on a running hub stays light: the answer comes over the standard
library's HTTP client on one kept-alive connection, without importing httpx, pydantic,
asyncio or the MCP SDK and without building a TLS context for a plain ``http://`` hub
(they cost more than the call itself)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.fixtures_upstream import free_port
from tests.hubtest import PY, ROOT, echo_server_toml, http_hub, hub_env, write_config

pytestmark = pytest.mark.anyio

PROBE = """
import json, ssl, sys
made = []
real = ssl.create_default_context
ssl.create_default_context = lambda *a, **k: made.append(1) or real(*a, **k)
from mcp_hub.cli.main import main
sys.argv = ["mcp-hub", "call", "echo_echo", "--config", sys.argv[1], "--args", '{"text": "light"}']
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
roots = ("httpx2", "httpcore2", "mcp", "pydantic", "anyio", "asyncio")
heavy = sorted(m for m in sys.modules if m.split(".")[0] in roots)
print(json.dumps({"code": code, "heavy": heavy, "tls_contexts": len(made)}), file=sys.stderr)
"""


async def test_a_call_to_a_running_hub_imports_no_http_library_and_no_tls(tmp_path: Path) -> None:
    port = free_port()
    config = write_config(tmp_path, echo_server_toml("echo"), hub=f"[hub.http]\nport = {port}\n")
    with anyio.fail_after(120):
        async with http_hub(config, tmp_path, "--port", str(port)):
            done = await anyio.to_thread.run_sync(lambda: subprocess.run(
                [PY, "-c", PROBE, str(config)], cwd=str(ROOT), env=hub_env(),
                capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL))
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] in (0, None), done.stderr
    assert "light" in done.stdout
    assert f"asked the hub at http://127.0.0.1:{port}" in done.stderr
    assert report["heavy"] == [], report
    assert report["tls_contexts"] == 0

