"""An issue-tracker MCP server built with the Python SDK (``MCPServer``), over stdio.

``python -m tests.fixtures_upstream.tracker_server``

Tools answer with the arguments exactly as they arrived, so a test sees what an
upstream receives through the hub:

* ``create_issue(owner, repo, title, labels=[], body="")`` → structured output
  ``{"owner", "repo", "title", "labels", "body", "number"}`` (it has an ``outputSchema``);
* ``list_issues(owner)`` → text ``owner=<owner>``;
* ``received()`` → how many calls ``create_issue`` received so far (text).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

server = MCPServer("tracker")
_calls = {"create_issue": 0}


class Issue(BaseModel):
    """An issue as the tracker stored it."""

    owner: str
    repo: str
    title: str
    labels: list[str]
    body: str
    number: int


@server.tool()
def create_issue(owner: str, repo: str, title: str, labels: list[str] | None = None,
                 body: str = "") -> Issue:
    """Create an issue in a repository of any owner."""
    _calls["create_issue"] += 1
    return Issue(owner=owner, repo=repo, title=title, labels=list(labels or []), body=body,
                 number=_calls["create_issue"])


@server.tool()
def list_issues(owner: str) -> str:
    """List the open issues of an owner."""
    return f"owner={owner}"


@server.tool()
def received() -> str:
    """How many create_issue calls arrived."""
    return str(_calls["create_issue"])


if __name__ == "__main__":
    server.run("stdio")
