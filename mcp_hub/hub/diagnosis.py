"""One line a model can relay: what is wrong with the hub's upstream servers, if anything.

Inside a desktop client the hub's log sits in a folder nobody reads; the user
only sees that tools are missing. So the ``hub_status`` tool leads with
:func:`summary`, and the initialize result's ``instructions`` carry
:func:`problem` — both name every server that is not connected and why (secrets
redacted), or that no config file was found at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mcp_hub.redact import redact
from mcp_hub.registry.naming import upstream_toolset

__all__ = ["problem", "rejected_tools", "summary"]

_FAILING = ("parked", "reconnecting", "needs_login")
_MAX_ERROR = 200
_SEARCHED = "--config, $MCP_HUB_CONFIG, ./servers.toml, ~/.config/mcp-hub/servers.toml"


def _why(up: Mapping[str, Any]) -> str:
    error = redact(str(up.get("last_error") or "no error recorded")).splitlines()[0]
    if len(error) > _MAX_ERROR:
        error = error[: _MAX_ERROR - 1] + "…"
    return f"{up['name']} ({up['state']}: {error})"


def _fix(source: Path | None) -> str:
    where = f" ({source})" if source else ""
    return (f"Fix servers.toml{where} — the hub reloads it by itself — and `mcp-hub check` "
            "prints each server's error and the PATH it gets.")


def problem(upstreams: Sequence[Mapping[str, Any]], source: Path | None) -> str | None:
    """A sentence naming what keeps tools away (None: nothing is wrong).

    ``upstreams`` are mappings with ``name``, ``state``, ``last_error`` (and
    ``tools``), as in ``Hub.status()["upstreams"]``.
    """
    if source is None and not upstreams:
        return ("No config file was found (searched " + _SEARCHED + "), so no upstream MCP "
                "servers are configured and only the hub's own tools are available. Start the "
                "hub with `serve --config /path/to/servers.toml`.")
    enabled = [u for u in upstreams if u["state"] != "disabled"]
    failing = [u for u in enabled if u["state"] in _FAILING]
    if not failing:
        return None
    names = "; ".join(_why(u) for u in failing)
    if len(failing) == len(enabled):
        if len(enabled) == 1:
            return f"The only upstream MCP server is not connected, so its tools are missing: " \
                   f"{names}. {_fix(source)}"
        return (f"None of the {len(enabled)} upstream MCP servers is connected, so their tools "
                f"are missing: {names}. {_fix(source)}")
    return (f"{len(failing)} of {len(enabled)} upstream MCP servers are not connected, so "
            f"their tools are missing: {names}. {_fix(source)}")


def summary(upstreams: Sequence[Mapping[str, Any]], source: Path | None) -> str:
    """One line on the upstream servers: the problem if there is one, else how they are."""
    trouble = problem(upstreams, source)
    if trouble is not None:
        return trouble
    enabled = [u for u in upstreams if u["state"] != "disabled"]
    if not enabled:
        return f"No upstream MCP servers are enabled in {source}; only the hub's own tools are " \
               "available."
    ready = [u for u in enabled if u["state"] == "ready"]
    tools = sum(int(u.get("tools") or 0) for u in ready)
    if len(ready) == len(enabled):
        every = "The upstream MCP server is" if len(enabled) == 1 else \
            f"All {len(enabled)} upstream MCP servers are"
        return f"{every} connected ({tools} tools)."
    waiting = ", ".join(u["name"] for u in enabled if u["state"] != "ready")
    return (f"{len(ready)} of {len(enabled)} upstream MCP servers are connected ({tools} "
            f"tools); still connecting: {waiting}.")


def rejected_tools(rejections: Iterable[Any], statuses: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Every refused tool name, reasons redacted: the registry's rejections, then the
    names each upstream reports as shadowed or blocked (``UpstreamStatus.rejected_tools``).

    One list for ``Hub.status()`` and the ``hub_status`` tool without a hub.
    """
    rows: list[dict[str, Any]] = [
        {"name": r.name, "toolset": r.toolset, "held_by": r.holder_toolset,
         "reason": redact(r.reason), "since": r.time}
        for r in rejections
    ]
    seen = {(r["name"], r["toolset"]) for r in rows}
    for st in statuses:
        toolset = upstream_toolset(st.name)
        for tool, reason in (getattr(st, "rejected_tools", {}) or {}).items():
            if (tool, toolset) not in seen:
                rows.append({"name": tool, "toolset": toolset, "held_by": None,
                             "reason": redact(reason), "since": None})
    return rows
