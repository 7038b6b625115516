"""Capture the blind evaluation catalog: published MCP servers' tool definitions.

The mechanism is the tuning catalog's (``bench/search_eval/capture.py``): each
server is started over stdio with the SDK client, initialised, and its
``tools/list`` read page by page. Credentials are placeholders, so only servers
that list their tools without reaching their backend end up in the catalog.

The servers are installed outside the repository, each Python package in its own
virtual environment (their SDK pins differ) and the npm packages in one folder::

    python3 -m venv /tmp/blind-uv && /tmp/blind-uv/bin/pip install uv
    for p in mcp-atlassian serena-agent ...; do      # every "venv" package in SERVERS
        /tmp/blind-uv/bin/uv venv /tmp/blind-venv/$p
        VIRTUAL_ENV=/tmp/blind-venv/$p /tmp/blind-uv/bin/uv pip install $p
    done
    for p in @stripe/mcp @heroku/mcp-server ...; do   # every "npm" package in SERVERS
        d=/tmp/blind-npm/$(echo "$p" | tr '@/' '_+') && mkdir -p $d && \\
            (cd $d && echo '{"private":true}' > package.json && npm install --ignore-scripts "$p")
    done

then run ``.venv/bin/python -m bench.search_eval.blind.capture``. It writes
``catalog.json`` (``{server: [tool definitions]}``, the tuning catalog's format)
and ``sources.json`` (``{server: {"registry", "package", "version"}}``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters

from bench.search_eval.blind.servers import SERVERS, BlindServer
from bench.search_eval.capture import _list_all

HERE = Path(__file__).resolve().parent


def npm_folder(npm_dir: Path, package: str) -> Path:
    """The folder one npm package is installed in (each has its own: their bin names clash)."""
    return npm_dir / package.replace("@", "_").replace("/", "+")


def _command(server: BlindServer, venv_root: Path, npm_dir: Path) -> str:
    if server.registry == "pypi":
        return str(venv_root / server.package / "bin" / server.command)
    return str(npm_folder(npm_dir, server.package) / "node_modules" / ".bin" / server.command)


def _params(server: BlindServer, venv_root: Path, npm_dir: Path, tmp: str) -> StdioServerParameters:
    args = [a.replace("{tmp}", tmp) for a in server.args]
    env = {k: v.replace("{tmp}", tmp) for k, v in server.env.items()}
    env.setdefault("HOME", tmp)
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return StdioServerParameters(command=_command(server, venv_root, npm_dir), args=args, env=env, cwd=tmp)


def installed_version(server: BlindServer, venv_root: Path, npm_dir: Path) -> str:
    """The installed version of the server's package, read from its metadata."""
    if server.registry == "npm":
        manifest = npm_folder(npm_dir, server.package) / "node_modules" / server.package / "package.json"
        return str(json.loads(manifest.read_text())["version"])
    wanted = server.package.replace("-", "_").replace(".", "_").lower()
    for meta in (venv_root / server.package).glob("lib/python*/site-packages/*.dist-info"):
        name, _, version = meta.name.removesuffix(".dist-info").rpartition("-")
        if name.replace("-", "_").replace(".", "_").lower() == wanted:
            return version
    return "unknown"


async def capture(
    venv_root: Path, npm_dir: Path, per_server_seconds: float, only: set[str]
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, str]]]:
    """Return the catalog and each captured server's package and version."""
    catalog: dict[str, list[dict[str, Any]]] = {}
    sources: dict[str, dict[str, str]] = {}
    for server in SERVERS:
        if only and server.label not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            try:
                with anyio.fail_after(per_server_seconds):
                    tools = await _list_all(_params(server, venv_root, npm_dir, tmp))
            except Exception as exc:  # a server that cannot list is reported and skipped
                print(f"{server.label:22} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
        if not tools:
            print(f"{server.label:22} skipped: no tools", file=sys.stderr)
            continue
        catalog[server.label] = sorted(tools, key=lambda t: str(t["name"]))
        version = installed_version(server, venv_root, npm_dir)
        sources[server.label] = {"registry": server.registry, "package": server.package, "version": version}
        print(f"{server.label:22} {len(tools):4d} tools ({server.package} {version})", file=sys.stderr)
    return catalog, sources


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--venv-root", type=Path, default=Path("/tmp/blind-venv"))
    parser.add_argument("--npm-dir", type=Path, default=Path("/tmp/blind-npm"))
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--out", type=Path, default=HERE, help="folder for catalog.json and sources.json")
    parser.add_argument("--only", nargs="*", default=[], help="capture only these server labels (merged in)")
    ns = parser.parse_args()
    catalog, sources = anyio.run(capture, ns.venv_root, ns.npm_dir, ns.timeout, set(ns.only))
    ns.out.mkdir(parents=True, exist_ok=True)
    cat_path, src_path = ns.out / "catalog.json", ns.out / "sources.json"
    if ns.only and cat_path.exists():
        catalog = {**json.loads(cat_path.read_text()), **catalog}
        sources = {**json.loads(src_path.read_text()), **sources}
    cat_path.write_text(json.dumps(catalog, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    src_path.write_text(json.dumps(sources, indent=1, sort_keys=True) + "\n")
    total = sum(len(v) for v in catalog.values())
    print(f"{len(catalog)} servers, {total} tools -> {cat_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
