"""One reader of request bodies, checked on the source.

A request body is read once, bounded by ``[hub.http] max_body_bytes``, by
:class:`mcp_hub.downstream.http.body.BodyLimit`; every other layer takes it from
the scope (``request_body``). A layer that read the ASGI messages itself could
read without bound (a body of any size, behind any header). The scan reads every
module of ``mcp_hub/`` with :mod:`ast` and fails naming the module, the line and
the function that reads a body another way:

* a call of the ASGI ``receive`` (``await receive()``), outside the functions
  listed in :data:`RECEIVERS`;
* a Starlette request's ``body()``, ``json()``, ``form()``, ``stream()`` or
  ``receive()``;
* the ``"http.request"`` message type, outside :mod:`~mcp_hub.downstream.http.body`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "mcp_hub"

#: (module, function) allowed to call the ASGI ``receive``, and why.
RECEIVERS = {
    # The one bounded reader, and the receive that replays what it read.
    ("mcp_hub/downstream/http/body.py", "_read"),
    ("mcp_hub/downstream/http/body.py", "replay"),
    # Waits for http.disconnect once the body has been read (and drops what comes).
    ("mcp_hub/downstream/http/disconnects.py", "_wait_for_disconnect"),
}
#: Methods of a Starlette ``Request`` that read the body.
REQUEST_READS = {"body", "json", "form", "stream", "receive"}
#: Names a Starlette request goes by in the package.
REQUEST_NAMES = {"request", "req"}


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """Each node with the name of the innermost function holding it ("" at module level)."""
    def walk(node: ast.AST, name: str) -> Iterator[tuple[str, ast.AST]]:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            yield inner, child
            yield from walk(child, inner)
    yield from walk(tree, "")


def stray_body_reads(root: Path = PACKAGE) -> list[str]:
    """Every place under ``root`` that reads a request body other than through BodyLimit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root.parent).as_posix()
        for function, node in _functions(ast.parse(path.read_text(), str(path))):
            where = f"{module}:{getattr(node, 'lineno', '?')} in {function or '<module>'}"
            if isinstance(node, ast.Call):
                func = node.func
                if (isinstance(func, ast.Name) and func.id == "receive"
                        and (module, function) not in RECEIVERS):
                    found.append(f"{where}: calls the ASGI receive")
                elif (isinstance(func, ast.Attribute) and func.attr in REQUEST_READS
                      and isinstance(func.value, ast.Name) and func.value.id in REQUEST_NAMES):
                    found.append(f"{where}: {func.value.id}.{func.attr}()")
            elif (isinstance(node, ast.Constant) and node.value == "http.request"
                  and module != "mcp_hub/downstream/http/body.py"):
                found.append(f"{where}: handles http.request messages")
    return found


def test_request_bodies_are_read_only_by_the_bounded_reader(tmp_path: Path) -> None:
    assert stray_body_reads() == []
    # The scan itself sees each kind of stray read.
    package = tmp_path / "mcp_hub"
    package.mkdir()
    (package / "strays.py").write_text(
        "async def middleware(scope, receive, send):\n"
        "    message = await receive()\n"
        "    return message['type'] == 'http.request'\n"
        "async def route(request):\n"
        "    return await request.json()\n")
    found = stray_body_reads(package)
    assert len(found) == 3, found
