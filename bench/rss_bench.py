"""RSS of ``mcp-hub serve`` over stdio with one echo upstream, after warm-up, for one or more trees.

Measured the way ``bench/peers/run.py`` measures its RSS row: ``VmRSS`` of the
hub process (its upstream child not counted) after 200 warm-up calls. Each tree
is a directory holding an ``mcp_hub`` package (this checkout by default, or an
older commit unpacked with ``git archive <commit> mcp_hub builtin_tools | tar -x
-C DIR``); the hub runs with ``PYTHONPATH=DIR`` on this checkout's venv, the
echo upstream from this checkout. Trees alternate over ``--rounds`` so a side
by side comparison shares the machine's state. RSS is not timing: the load of
the machine barely moves it. Run::

    .venv/bin/python bench/rss_bench.py [TREE ...] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ECHO_ARGS, PY, ROOT, base_env, hub_command, stdio_endpoint, vm_status, warm_up

WARM_UP_CALLS = 200


def _config(path: Path) -> Path:
    """One stdio echo upstream, started from this checkout whatever tree the hub runs."""
    path.write_text("\n".join([
        "[hub]", "startup_timeout = 30", 'log_level = "warning"', "",
        "[servers.echo]", f"command = {json.dumps(PY)}", f"args = {json.dumps(ECHO_ARGS)}",
        f"cwd = {json.dumps(str(ROOT))}", f"env = {{ PYTHONPATH = {json.dumps(str(ROOT))} }}", ""]))
    return path


async def rss_after_warm_up(tree: Path) -> int | None:
    """VmRSS (KiB) of a stdio hub running ``tree``'s code after the warm-up calls."""
    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp) / "servers.toml")
        env = base_env()
        env["PYTHONPATH"] = str(tree)
        async with stdio_endpoint(PY, hub_command(config), env=env, cwd=tree) as conn:
            listed = await conn.session.list_tools()
            tool = next(t.name for t in listed.tools if t.name.endswith("echo"))
            await warm_up(conn.session, tool, {"text": "warm"}, calls=WARM_UP_CALLS)
            return vm_status(conn.pid, "VmRSS") if conn.pid is not None else None


async def run(trees: list[Path], rounds: int) -> None:
    for _ in range(rounds):
        for tree in trees:
            kib = await rss_after_warm_up(tree)
            print(f"{tree}\t{kib / 1024:.1f} MiB" if kib else f"{tree}\t—", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="*", type=Path, default=[ROOT])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    anyio.run(run, [t.resolve() for t in args.trees], args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
