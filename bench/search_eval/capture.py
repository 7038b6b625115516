"""Capture real MCP servers' tool definitions into ``catalog.json``.

Each server is started over stdio with the SDK client, initialised, and its
``tools/list`` is read page by page. Credentials are placeholders: only servers
that list their tools without talking to their backend end up in the catalog
(@supabase/mcp-server-supabase and @azure-devops/mcp do not, so they are not listed).

Install the servers first, outside the repository::

    python3 -m venv /tmp/catalog-venv
    /tmp/catalog-venv/bin/pip install mcp-server-time mcp-server-git mcp-server-fetch
    python3 -m venv /tmp/catalog-venv-legacy
    /tmp/catalog-venv-legacy/bin/pip install "mcp>=1.9,<1.20" "pydantic<2.12" mcp-server-sqlite
    mkdir -p /tmp/catalog-npm && cd /tmp/catalog-npm && npm init -y && \
        PUPPETEER_SKIP_DOWNLOAD=1 npm install @modelcontextprotocol/server-filesystem \
        @modelcontextprotocol/server-memory ...   # see SERVERS below

then run ``.venv/bin/python -m bench.search_eval.capture`` (``--py-bin`` and
``--npm-dir`` point at other install locations).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "catalog.json"


@dataclass(frozen=True)
class Server:
    """One server to capture: a label, how it is installed and started."""

    label: str
    kind: str  # "py" (console script in --py-bin) or "npm" (bin in --npm-dir)
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    package: str = ""


SERVERS: tuple[Server, ...] = (
    Server("time", "py", "mcp-server-time", package="mcp-server-time"),
    Server("git", "py", "mcp-server-git", package="mcp-server-git"),
    Server("fetch", "py", "mcp-server-fetch", package="mcp-server-fetch"),
    # mcp-server-sqlite 2025.4 predates the SDK's 2.x server API: it lives in its own venv.
    Server("sqlite", "py-legacy", "mcp-server-sqlite", ("--db-path", "{tmp}/capture.db"), package="mcp-server-sqlite"),
    Server("everything", "node", "{everything}", ("stdio",), package="@modelcontextprotocol/server-everything"),
    Server("filesystem", "npm", "mcp-server-filesystem", ("{tmp}",), package="@modelcontextprotocol/server-filesystem"),
    Server(
        "memory",
        "npm",
        "mcp-server-memory",
        env={"MEMORY_FILE_PATH": "{tmp}/memory.json"},
        package="@modelcontextprotocol/server-memory",
    ),
    Server(
        "github",
        "npm",
        "mcp-server-github",
        env={"GITHUB_PERSONAL_ACCESS_TOKEN": "placeholder"},
        package="@modelcontextprotocol/server-github",
    ),
    Server(
        "gitlab",
        "npm",
        "mcp-server-gitlab",
        env={"GITLAB_PERSONAL_ACCESS_TOKEN": "placeholder"},
        package="@modelcontextprotocol/server-gitlab",
    ),
    Server(
        "slack",
        "npm",
        "mcp-server-slack",
        env={"SLACK_BOT_TOKEN": "placeholder", "SLACK_TEAM_ID": "T0000"},
        package="@modelcontextprotocol/server-slack",
    ),
    Server(
        "brave-search",
        "npm",
        "mcp-server-brave-search",
        env={"BRAVE_API_KEY": "placeholder"},
        package="@modelcontextprotocol/server-brave-search",
    ),
    Server(
        "google-maps",
        "npm",
        "mcp-server-google-maps",
        env={"GOOGLE_MAPS_API_KEY": "placeholder"},
        package="@modelcontextprotocol/server-google-maps",
    ),
    Server(
        "postgres",
        "npm",
        "mcp-server-postgres",
        ("postgresql://localhost:1/none",),
        package="@modelcontextprotocol/server-postgres",
    ),
    Server("puppeteer", "npm", "mcp-server-puppeteer", package="@modelcontextprotocol/server-puppeteer"),
    Server("playwright", "npm", "playwright-mcp", ("--headless",), package="@playwright/mcp"),
    Server(
        "sequential-thinking",
        "npm",
        "mcp-server-sequential-thinking",
        package="@modelcontextprotocol/server-sequential-thinking",
    ),
    Server(
        "notion", "npm", "notion-mcp-server", env={"NOTION_TOKEN": "placeholder"}, package="@notionhq/notion-mcp-server"
    ),
    Server("kubernetes", "npm", "mcp-server-kubernetes", package="mcp-server-kubernetes"),
    Server("chrome-devtools", "npm", "chrome-devtools-mcp", package="chrome-devtools-mcp"),
    Server("mongodb", "npm", "mongodb-mcp-server", package="mongodb-mcp-server"),
    Server("firecrawl", "npm", "firecrawl-mcp", env={"FIRECRAWL_API_KEY": "fc-placeholder"}, package="firecrawl-mcp"),
    Server("tavily", "npm", "tavily-mcp", env={"TAVILY_API_KEY": "placeholder"}, package="tavily-mcp"),
    Server(
        "circleci",
        "npm",
        "mcp-server-circleci",
        env={"CIRCLECI_TOKEN": "placeholder"},
        package="@circleci/mcp-server-circleci",
    ),
    Server("context7", "npm", "context7-mcp", package="@upstash/context7-mcp"),
    Server(
        "aws-kb-retrieval",
        "npm",
        "mcp-server-aws-kb-retrieval",
        env={"AWS_ACCESS_KEY_ID": "placeholder", "AWS_SECRET_ACCESS_KEY": "placeholder", "AWS_REGION": "us-east-1"},
        package="@modelcontextprotocol/server-aws-kb-retrieval",
    ),
    Server(
        "everart",
        "npm",
        "mcp-server-everart",
        env={"EVERART_API_KEY": "placeholder"},
        package="@modelcontextprotocol/server-everart",
    ),
)


def _fill(text: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        text = text.replace("{" + key + "}", value)
    return text


def _params(server: Server, py_bin: Path, py_legacy_bin: Path, npm_dir: Path, tmp: str) -> StdioServerParameters:
    everything = Path(__file__).resolve().parents[2] / "js" / "node_modules" / "@modelcontextprotocol"
    subs = {"tmp": tmp, "everything": str(everything / "server-everything" / "dist" / "index.js")}
    if server.kind == "py":
        command = str(py_bin / server.command)
    elif server.kind == "py-legacy":
        command = str(py_legacy_bin / server.command)
    elif server.kind == "npm":
        command = str(npm_dir / "node_modules" / ".bin" / server.command)
    else:
        command = "node"
    args = [_fill(a, subs) for a in server.args]
    if server.kind == "node":
        args = [_fill(server.command, subs), *args]
    env = {k: _fill(v, subs) for k, v in server.env.items()}
    return StdioServerParameters(command=command, args=args, env=env, cwd=tmp)


async def _list_all(params: StdioServerParameters) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            cursor: str | None = None
            while True:
                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools


async def capture(
    py_bin: Path, py_legacy_bin: Path, npm_dir: Path, per_server_seconds: float
) -> dict[str, list[dict[str, Any]]]:
    """Return ``{server label: [tool definitions]}`` for every server that answered."""
    catalog: dict[str, list[dict[str, Any]]] = {}
    for server in SERVERS:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                with anyio.fail_after(per_server_seconds):
                    tools = await _list_all(_params(server, py_bin, py_legacy_bin, npm_dir, tmp))
            except Exception as exc:  # a server that cannot list is reported and skipped
                print(f"{server.label:22} skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
        if tools:
            catalog[server.label] = sorted(tools, key=lambda t: str(t["name"]))
        print(f"{server.label:22} {len(tools):4d} tools ({server.package})", file=sys.stderr)
    return catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--py-bin", type=Path, default=Path("/tmp/catalog-venv/bin"))
    parser.add_argument("--py-legacy-bin", type=Path, default=Path("/tmp/catalog-venv-legacy/bin"))
    parser.add_argument("--npm-dir", type=Path, default=Path("/tmp/catalog-npm"))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=CATALOG)
    ns = parser.parse_args()
    catalog = anyio.run(capture, ns.py_bin, ns.py_legacy_bin, ns.npm_dir, ns.timeout)
    ns.out.write_text(json.dumps(catalog, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    total = sum(len(v) for v in catalog.values())
    print(f"{len(catalog)} servers, {total} tools -> {ns.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
