"""``mcp-hub pins diff`` and ``mcp-hub pins accept``: the CLI side of tool pinning.

These print to the terminal, so they live in the CLI layer, not beside the store.
"""

from __future__ import annotations

import sys

from mcp_hub.config.model import HubConfig
from mcp_hub.pins.pinning import PinError
from mcp_hub.pins.stores import open_pin_store

__all__ = ["cmd_pins_accept", "cmd_pins_diff"]


def cmd_pins_diff(config: HubConfig) -> int:
    """``mcp-hub pins diff``: print every recorded change; 0 when there is none, else 1.

    Changes are recorded by any hub run that listed the upstreams (``serve``,
    ``check``, ``tools``); run ``mcp-hub check`` to record the current state.
    """
    try:
        store = open_pin_store(config)
        changes = store.diff()
    except PinError as exc:
        print(f"mcp-hub: {exc}", file=sys.stderr)
        return 2
    if not changes:
        print(f"no tool changed since it was pinned ({store.path})")
        return 0
    for change in changes:
        print(change.describe())
    print(f"\n{len(changes)} changed tool(s); accept with: mcp-hub pins accept SERVER[/TOOL]")
    return 1


def cmd_pins_accept(config: HubConfig, target: str) -> int:
    """``mcp-hub pins accept SERVER[/TOOL]``: re-pin recorded changes; 1 if nothing matched."""
    server, _, tool = target.partition("/")
    if not server:
        print("mcp-hub: pins accept: expected SERVER or SERVER/TOOL", file=sys.stderr)
        return 2
    try:
        store = open_pin_store(config)
        accepted = store.accept(server, tool or None)
    except PinError as exc:
        print(f"mcp-hub: {exc}", file=sys.stderr)
        return 2
    if not accepted:
        what = f"{server}/{tool}" if tool else f"server {server}"
        print(f"mcp-hub: no recorded change for {what}; `mcp-hub pins diff` lists them",
              file=sys.stderr)
        return 1
    for raw in accepted:
        print(f"accepted {server}/{raw}")
    return 0
