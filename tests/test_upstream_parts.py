"""One upstream connection is one class composed of parts, each defined in its own module.

``ServerConnection`` (upstream/connection.py) supervises; its shared state, catalog,
call path and relays are objects of their own classes (conn_state.py, catalog.py,
calls.py, relays.py), made with the one shared state. The registry's handler of an
upstream tool calls the call path itself, with no hop through the connection.
"""

from __future__ import annotations

import inspect
from typing import Any

import anyio
import pytest

from mcp_hub.pipeline.context import CallContext
from mcp_hub.upstream import calls, catalog, conn_state, connection, relays
from tests.fixtures_upstream import echo_block, running, text_of

pytestmark = pytest.mark.anyio

#: Each class of one connection, with the one module that defines it.
_PARTS: list[tuple[type[Any], str]] = [
    (connection.ServerConnection, connection.__name__),
    (conn_state.ConnectionState, conn_state.__name__),
    (catalog.Catalog, catalog.__name__),
    (calls.Calls, calls.__name__),
    (relays.Relays, relays.__name__),
]


@pytest.mark.parametrize(("cls", "module"), _PARTS, ids=[c.__name__ for c, _ in _PARTS])
def test_each_class_of_a_connection_is_defined_in_one_module(cls: type[Any], module: str) -> None:
    assert cls.__mro__ == (cls, object), "a part is composed, never inherited"
    assert cls.__module__ == module
    for name, member in vars(cls).items():
        fn = member.fget if isinstance(member, property) else member
        if inspect.isfunction(fn):
            assert fn.__module__ == module, name


async def test_the_parts_share_one_state_and_a_tool_s_handler_is_the_call_path() -> None:
    with anyio.fail_after(30):
        async with running(echo_block()) as (manager, registry):
            conn = manager.connection("echo")
            assert conn is not None
            shared = conn.shared
            assert conn.catalog.shared is shared
            assert conn.calls.shared is shared
            assert conn.relays.shared is shared
            assert conn.tools is shared.tools and "echo_add" in conn.exposed

            entry = registry.get_entry("echo_add")
            assert entry is not None
            closure = [cell.cell_contents for cell in entry.handler.__closure__ or ()]
            assert conn.calls.call_tool in closure, "the handler calls Calls.call_tool itself"

            result = await registry.dispatch("echo_add", {"a": 2, "b": 3}, call=CallContext())
            assert result.structured_content == {"sum": 5}
            raw = conn.exposed["echo_fail"]
            direct = await conn.call_tool(raw, {"message": "as sent"}, CallContext())
            assert direct.is_error and text_of(direct) == "as sent"
