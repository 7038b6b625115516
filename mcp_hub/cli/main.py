"""``mcp-hub``: thin commands over :class:`~mcp_hub.hub.core.Hub`.

Every command loads the config by the documented search order (``--config``,
``$MCP_HUB_CONFIG``, ``./servers.toml``, ``~/.config/mcp-hub/servers.toml``).
Logs go to stderr; stdout carries the stdio transport or the command's output.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_hub import __version__
from mcp_hub.cli import login as oauth_commands
from mcp_hub.config.path import find_config_path
from mcp_hub.redact import RedactingFilter, add_secrets, redact

if TYPE_CHECKING:
    from mcp_hub.cli.hub_client import RemoteHub
    from mcp_hub.config.model import HubConfig
    from mcp_hub.hub.core import Hub

# Everything heavier (the MCP SDK, pydantic models) is imported inside the commands,
# after main() has started the stdio upstreams (see mcp_hub.upstream.stdio.prespawn).

__all__ = ["main"]

logger = logging.getLogger("mcp_hub")


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        server = getattr(record, "server", None)
        if server:
            data["server"] = server
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            data["trace_id"], data["span_id"] = trace_id, getattr(record, "span_id", "")
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data)


def setup_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr (stdout belongs to the stdio transport), secrets redacted, with the
    active span's ids (mcp_hub.telemetry.logs)."""
    from mcp_hub.telemetry.logs import TraceFormatter, TraceLogFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter())
    handler.addFilter(TraceLogFilter())
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(TraceFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for noisy in ("httpx", "httpx2", "httpcore", "uvicorn.access", "mcp.server.lowlevel.server",
                  "sse_starlette"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_async(fn: Any) -> Any:
    """Run ``fn`` on asyncio, with uvloop's faster event loop where it is installed."""
    import anyio  # here: `call` on a running hub needs no event loop (nor asyncio's import)

    try:
        import uvloop  # noqa: F401
    except ImportError:
        return anyio.run(fn)
    return anyio.run(fn, backend_options={"use_uvloop": True})


def _load(args: argparse.Namespace) -> HubConfig:
    from mcp_hub.config.model import load_config

    config = load_config(args.config)
    add_secrets(config.secret_values)
    # What tools/call/status print is their output: the hub's INFO lines are not part of it.
    default = "warning" if args.command in _QUIET_COMMANDS else config.hub.log_level
    setup_logging(args.log_level or default, args.log_format or config.hub.log_format)
    return config


def _only_server(config: HubConfig, server: str | None) -> None:
    """``--server NAME``: every other server of ``config`` stays disabled."""
    from mcp_hub.hub_errors import HubError

    if server is None:
        return
    if server not in config.servers:
        raise HubError(f"--server {server}: no such server in {config.source or 'the config'} "
                       f"(servers: {', '.join(sorted(config.servers)) or 'none'})")
    for name, settings in config.servers.items():
        settings.enabled = settings.enabled and name == server


def _started_here(config: HubConfig, args: argparse.Namespace) -> None:
    """Say that the command started the config's servers itself, and why."""
    where = getattr(args, "probed", None)
    why = f"no hub answers at {where}" if where else "--local"
    count = len(config.enabled_servers())
    _say(args, f"{why}: started {count} server{'s' if count != 1 else ''} of "
               f"{config.source or 'the config'} here")


def _asked(remote: RemoteHub, args: argparse.Namespace | None = None) -> None:
    _say(args, f"asked the hub at {remote.base} (--local starts the servers here instead)")


def _say(args: argparse.Namespace | None, message: str) -> None:
    """One line on stderr about what the command did; a JSON object like the log
    records' when ``--log-format json`` (stderr then stays one JSON value a line)."""
    if args is not None and getattr(args, "log_format", None) == "json":
        print(json.dumps({"level": "INFO", "logger": "mcp_hub.cli.main", "message": message}),
              file=sys.stderr)
        return
    print(f"mcp-hub: {message}", file=sys.stderr)


def _server_prefix(args: argparse.Namespace) -> str | None:
    """``--server NAME``'s tool-name prefix with its separator, from the config."""
    if not getattr(args, "server", None):
        return None
    config = _load(args)
    _only_server(config, args.server)
    prefix = config.servers[args.server].effective_prefix(args.server)
    return prefix + config.hub.tool_name_separator if prefix else ""


def remote_hub(args: argparse.Namespace) -> RemoteHub | None:
    """The running hub ``status``/``tools``/``call`` ask: ``--url``, else the config's
    ``[hub.http]`` address when something answers there; None: none (or ``--local``)."""
    from mcp_hub.cli import hub_address

    if getattr(args, "local", False):
        return None
    token = getattr(args, "token", None) or os.environ.get("MCP_HUB_TOKEN") or None
    url = getattr(args, "url", None)
    if url:
        url = url.rstrip("/")
        return _remote(url[: -len("/mcp")] if url.endswith("/mcp") else url, token)
    host, port = hub_address.configured_address(find_config_path(args.config))
    base = hub_address.base_url(host, port)
    args.probed = base
    return _remote(base, token) if hub_address.answers(host, port) else None


def _remote(base: str, token: str | None) -> RemoteHub:
    from mcp_hub.cli.hub_client import RemoteHub

    return RemoteHub(base, token)


# ---------------------------------------------------------------------------- commands


def cmd_serve(args: argparse.Namespace) -> int:
    from mcp_hub.downstream.runners import serve_http, serve_stdio
    from mcp_hub.errors import ConfigError

    config = _load(args)
    if args.profile and args.profile not in config.profiles:
        raise ConfigError(f"unknown profile {args.profile!r}; defined: {sorted(config.profiles)}")
    if args.transport == "stdio":
        run_async(lambda: serve_stdio(config, profile=args.profile))
        return 0
    host = args.host or config.hub.http.host
    port = config.hub.http.port if args.port is None else args.port
    stateless = args.stateless or config.hub.http.stateless
    run_async(lambda: serve_http(
        config, host=host, port=port, stateless=stateless,
        allow_unauthenticated=args.allow_unauthenticated,
        port_file=Path(args.port_file) if args.port_file else None,
    ))
    return 0


async def _with_hub(config: HubConfig, fn: Any, *, wait: bool = True) -> Any:
    from mcp_hub.hub.core import Hub

    async with Hub(config) as hub:
        if wait:
            await hub.wait_ready()
        return await fn(hub)


def cmd_tools(args: argparse.Namespace) -> int:
    remote = args.remote
    if remote is not None and not args.tokens and not args.profile:
        return _tools_remote(args, remote)
    config = _load(args)
    _only_server(config, args.server)
    if remote is not None:
        print("mcp-hub: --tokens and --profile need every definition: started the servers here",
              file=sys.stderr)
    else:
        _started_here(config, args)

    async def run(hub: Hub) -> int:
        from mcp_hub.registry.naming import server_of_toolset
        from mcp_hub.search.tool_search import estimate_tokens

        entries = hub.registry.snapshot()
        rows = []
        for name in sorted(entries):
            e = entries[name]
            server = server_of_toolset(e.toolset) or ""
            if args.server and server != args.server:
                continue
            available = hub.registry.is_available(e)
            rows.append({"name": name, "server": server, "toolset": e.toolset,
                         "origin": e.origin, "available": available,
                         **({} if available else {"unavailable": _unavailable(hub, e, server)}),
                         "description": (e.description or "").strip().splitlines()[0][:100]
                         if e.description else "", **rewrite_fields(hub, server, name, args.profile)})
        rejected = hub.status()["rejected_tools"]
        tokens: dict[str, Any] | None = None
        if args.tokens:
            full = hub.registry.get_definitions()
            visible = [t.model_dump(by_alias=True, mode="json", exclude_none=True)
                       for t in hub.list_tools(args.profile)]
            state = hub.tool_search_state(args.profile)
            bridged = hub.bridge.definitions_when_active(full)
            tokens = {"all_tools": estimate_tokens(full), "as_listed": estimate_tokens(visible),
                      "with_bridging": estimate_tokens(bridged), "tool_search": state}
        if args.json:
            out: dict[str, Any] = {"tools": rows, "rejected": rejected}
            if tokens is not None:
                out["tokens"] = tokens
            print(json.dumps(out, indent=2))
            return 0
        width = max((len(r["name"]) for r in rows), default=10)
        print(f"{'TOOL':<{width}}  {'TOOLSET':<20}  DESCRIPTION")
        for r in rows:
            mark = "" if r["available"] else f" (unavailable: {r['unavailable']})"
            print(f"{r['name']:<{width}}  {r['toolset']:<20}  {r['description']}{mark}")
        print(f"\n{len(rows)} tools", file=sys.stdout)
        for r in rejected:
            print(f"REJECTED {r['name']} from {r['toolset']}: {r['reason']}")
        if tokens is not None:
            print(f"\nestimated definition tokens: all tools {tokens['all_tools']}, "
                  f"as listed now {tokens['as_listed']}, with bridging {tokens['with_bridging']} "
                  f"(tool_search {'active' if tokens['tool_search']['active'] else 'inactive'})")
        return 0

    return int(run_async(lambda: _with_hub(config, run)))


def _unavailable(hub: Hub, entry: Any, server: str) -> str:
    """Why a registered tool is not listed to clients now."""
    missing = [v for v in entry.requires_env or () if not os.environ.get(v)]
    if missing:
        return f"needs {', '.join(missing)} in the environment"
    if server:
        state = next((str(getattr(st.state, "value", st.state))
                      for st in hub.upstreams.statuses() if st.name == server), "gone")
        if state != "ready":
            return f"server {server} is {state}"
    return _OFF_BUILTINS.get(entry.toolset, "its availability check does not pass now")


#: Why a builtin toolset is not listed, when its check does not pass (docs/builtins.md).
_OFF_BUILTINS = {
    "file": "set [builtins.file] roots to list it",
    "terminal": "set [builtins.terminal] enabled = true to list it (never on a non-loopback "
                "bind without auth)",
}


def _tools_remote(args: argparse.Namespace, remote: RemoteHub) -> int:
    """``mcp-hub tools`` against a running hub: what it lists to a client like this one."""
    prefix = _server_prefix(args)
    _asked(remote, args)
    tools = remote.list_tools()
    if prefix is not None:
        tools = [t for t in tools if str(t.get("name", "")).startswith(prefix)]
    rows = [{"name": str(t.get("name", "")),
             "description": (str(t.get("description") or "").strip().splitlines() or [""])[0][:100]}
            for t in tools]
    if args.json:
        print(json.dumps({"hub": remote.base, "tools": rows}, indent=2))
        return 0
    width = max((len(r["name"]) for r in rows), default=10)
    print(f"{'TOOL':<{width}}  DESCRIPTION")
    for r in sorted(rows, key=lambda r: r["name"]):
        print(f"{r['name']:<{width}}  {r['description']}")
    print(f"\n{len(rows)} tools, as the hub at {remote.base} lists them to clients")
    return 0


def rewrite_fields(hub: Hub, server: str, name: str, profile: str | None) -> dict[str, Any]:
    """``upstream_name`` and ``rewrites`` (the server's rule, secrets redacted) of one tool,
    and ``profile_rewrites`` (``profile``'s rule on top) when it has one."""
    from mcp_hub.rewrite.tool import applied

    conn = hub.upstreams.connection(server) if server else None
    if conn is None or name not in conn.exposed:
        return {}
    raw = conn.exposed[name]
    secrets = hub.config.secret_values
    rule = conn.config.tools.get(raw)
    out = {"upstream_name": raw, "rewrites": applied(rule, secrets) if rule is not None else {}}
    settings = hub.config.profiles.get(profile) if profile else None
    if settings is not None and name in settings.tools:
        out["profile_rewrites"] = applied(settings.tools[name], secrets)
    return out


def cmd_check(args: argparse.Namespace) -> int:
    config = _load(args)

    async def run(hub: Hub) -> int:
        statuses = hub.upstreams.statuses()
        failed = 0
        header = f"{'SERVER':<20} {'STATE':<13} {'TRANSPORT':<9} {'TOOLS':>5} {'PROMPTS':>7} " \
                 f"{'RESOURCES':>9} {'CONNECT':>9}  ERROR"
        print(header)
        for st in statuses:
            state = str(getattr(st.state, "value", st.state))
            if state not in ("ready", "disabled"):
                failed += 1
            connect = f"{st.connect_ms:.0f} ms" if st.connect_ms is not None else "-"
            err = redact(st.last_error or "")
            print(f"{st.name:<20} {state:<13} {st.transport:<9} {st.tools:>5} {st.prompts:>7} "
                  f"{st.resources:>9} {connect:>9}  {err}")
        print(f"\nconfig: {config.source or '(none found: empty config)'}; "
              f"{len(statuses)} servers, {failed} not ready")
        from mcp_hub.cli.login import token_store_line

        if line := token_store_line(config):
            print(line)
        from mcp_hub.clients.launch import child_path_lines

        for line in child_path_lines(config):
            print(line)
        mistakes = rewrite_problems(hub)
        for line in mistakes:
            print(f"rewrite: {line}")
        return 1 if failed or mistakes else 0

    return int(run_async(lambda: _with_hub(config, run)))


def rewrite_problems(hub: Hub) -> list[str]:
    """The mistakes in the config's tool rewrites, against what the upstreams list now."""
    from mcp_hub.registry.naming import is_upstream_toolset
    from mcp_hub.rewrite.check import problems

    config = hub.config
    listings = {conn.name: [t.model_dump(by_alias=True, mode="json", exclude_none=True)
                            for t in conn.listed]
                for conn in hub.upstreams.connections() if conn.session is not None}
    others = {n: e.toolset for n, e in hub.registry.snapshot().items()
              if not is_upstream_toolset(e.toolset)}
    found: list[str] = problems(config.servers, listings, config.profiles, others,
                                config.hub.tool_name_separator, config.hub.max_tool_name_length,
                                dedupe=config.hub.dedupe_prefix)
    return found


def cmd_call(args: argparse.Namespace) -> int:
    from mcp_hub.hub_errors import HubError

    try:
        arguments = json.loads(args.args) if args.args else {}
    except json.JSONDecodeError as exc:
        raise HubError(f"--args: not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise HubError("--args: must be a JSON object")
    remote = args.remote
    if remote is not None:
        prefix = _server_prefix(args)
        name = args.name if not prefix or args.name.startswith(prefix) else prefix + args.name
        _asked(remote, args)
        answer = remote.call_tool(name, arguments)
        print(json.dumps(answer, indent=2))
        return 1 if answer.get("isError") else 0
    config = _load(args)
    _only_server(config, args.server)
    _started_here(config, args)
    prefix = None
    if args.server:
        own = config.servers[args.server].effective_prefix(args.server)
        prefix = own + config.hub.tool_name_separator if own else ""

    async def run(hub: Hub) -> int:
        name = args.name
        if prefix and not name.startswith(prefix) and name not in hub.registry.snapshot():
            name = prefix + name
        result = await hub.call_tool(name, arguments)
        print(json.dumps(result.model_dump(by_alias=True, mode="json", exclude_none=True),
                         indent=2))
        return 1 if result.is_error else 0

    return int(run_async(lambda: _with_hub(config, run)))


def cmd_status(args: argparse.Namespace) -> int:
    remote = args.remote
    if remote is None:
        config = _load(args)
        _only_server(config, args.server)
        _started_here(config, args)

        async def local(hub: Hub) -> int:
            return _print_status(args, hub.status())

        return int(run_async(lambda: _with_hub(config, local)))
    _asked(remote, args)
    return _print_status(args, remote.status())


def _print_status(args: argparse.Namespace, status: dict[str, Any]) -> int:
    if args.server:
        status["upstreams"] = [u for u in status["upstreams"] if u["name"] == args.server]
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    hub = status["hub"]
    print(f"{hub['name']} {hub['version']}, up {hub['uptime_seconds']:.0f} s, "
          f"{status['tools']['total']} tools, {hub['sessions']} sessions")
    for u in status["upstreams"]:
        print(f"  {u['name']:<20} {u['state']:<13} {u['transport']:<6} tools={u['tools']:<4} "
              f"reconnects={u['reconnects']} {u['last_error'] or ''}")
    ts = status["tool_search"]
    print(f"tool_search: mode={ts['mode']} active={ts['active']} "
          f"deferrable_tokens={ts['deferrable_tokens']} threshold={ts['threshold_tokens']}")
    ranking = ts.get("ranking") or {}
    if ranking:
        why = f" ({ranking['reason']})" if ranking.get("reason") else ""
        print(f"tool_search ranking: {ranking.get('active')} (configured {ranking.get('configured')}){why}")
    for r in status["rejected_tools"]:
        print(f"REJECTED {r['name']} from {r['toolset']}: {r['reason']}")
    return 0


def snippet(client: str, *, config_path: str | None, url: str | None, name: str,
            token_env: str | None = None) -> dict[str, Any]:
    """The JSON that registers this hub in ``client``'s MCP configuration."""
    from mcp_hub.cli.clients import snippet as build

    return build(client, config_path=config_path, url=url, name=name, token_env=token_env)


def cmd_config(args: argparse.Namespace) -> int:
    from mcp_hub.cli.clients import run_snippet

    return run_snippet(args)


def cmd_install(args: argparse.Namespace) -> int:
    from mcp_hub.cli.clients import run_install, run_uninstall

    return run_install(args) if args.command == "install" else run_uninstall(args)


def cmd_import(args: argparse.Namespace) -> int:
    from mcp_hub.cli.import_command import run_import

    return run_import(args)


def cmd_pins(args: argparse.Namespace) -> int:
    from mcp_hub.cli.pins import cmd_pins_accept, cmd_pins_diff

    config = _load(args)
    if args.pins_command == "diff":
        return cmd_pins_diff(config)
    return cmd_pins_accept(config, args.target)


# ---------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mcp-hub",
        description="One MCP server in front of many: connects to the servers in servers.toml "
                    "and serves their tools, prompts and resources as one.",
    )
    parser.add_argument("--version", action="version", version=f"mcp-hub {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", "-c", help="path to servers.toml (default: search order)")
    common.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    common.add_argument("--log-format", choices=["text", "json"])
    common.add_argument("--debug", action="store_true",
                        help="on failure, print the traceback too")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_hub_commands(sub, common)
    _add_client_commands(sub, common)
    return parser


SubParsers = argparse._SubParsersAction  # the type argparse gives no public name


def _add_hub_commands(sub: SubParsers[argparse.ArgumentParser], common: argparse.ArgumentParser
                      ) -> None:
    """serve, tools, check, call, status."""
    p = sub.add_parser("serve", parents=[common], help="serve the hub (stdio by default)")
    p.add_argument("--transport", "-t", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", help="HTTP bind address (default hub.http.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="HTTP port (default hub.http.port, 8765; 0 = any)")
    p.add_argument("--stateless", action="store_true",
                   help="stateless Streamable HTTP, for scale-out behind a load balancer")
    p.add_argument("--profile", help="expose only this profile's toolsets")
    p.add_argument("--allow-unauthenticated", action="store_true",
                   help="allow a non-loopback bind without auth tokens (dangerous)")
    p.add_argument("--port-file", help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("tools", parents=[common, _client_options()],
                       help="list the tools (of the running hub, or of servers started here)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--tokens", action="store_true",
                   help="estimate definition tokens with and without tool_search bridging")
    p.add_argument("--profile")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("check", parents=[common],
                       help="validate the config and probe every server")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("call", parents=[common, _client_options()],
                       help="call one tool (through the running hub, or servers started here)")
    p.add_argument("name", help="the tool's name (with --server: also its name upstream)")
    p.add_argument("--args", default="{}", help="JSON object of arguments")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("status", parents=[common, _client_options()],
                       help="the status of the running hub (or of servers started here)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)


def _client_options() -> argparse.ArgumentParser:
    """What ``status``, ``tools`` and ``call`` share: which hub to ask, and how."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--url", help="a running hub's base URL or /mcp URL (default: [hub.http] "
                                 "host and port of the config)")
    p.add_argument("--token", help="bearer token for the running hub (default $MCP_HUB_TOKEN)")
    p.add_argument("--server", help="only this server's tools / status")
    p.add_argument("--local", action="store_true",
                   help="start the config's servers here even when a hub is running")
    return p


def _add_client_commands(sub: SubParsers[argparse.ArgumentParser],
                         common: argparse.ArgumentParser) -> None:
    """config snippet, install, uninstall, pins, import."""
    p = sub.add_parser("config", parents=[common], help="client configuration helpers")
    csub = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    s = csub.add_parser("snippet", parents=[common],
                        help="print the JSON that registers this hub in a client")
    s.add_argument("client", choices=_CLIENTS)
    s.add_argument("--url", help="point the client at a running HTTP hub instead of stdio")
    s.add_argument("--token-env", metavar="NAME", help=_TOKEN_ENV_HELP)
    s.add_argument("--name", default="mcp-hub", help="the server name in the client's config")
    s.set_defaults(func=cmd_config)
    for verb, text in (("install", "write the hub into a client's MCP config (backed up first)"),
                       ("uninstall", "remove the hub's entry from a client's MCP config")):
        p = sub.add_parser(verb, parents=[common], help=text)
        p.add_argument("client", choices=_CLIENTS)
        p.add_argument("--name", default="mcp-hub", help="the server name in the client's config")
        p.add_argument("--file", help="the client's config file (default: its usual location)")
        if verb == "install":
            p.add_argument("--url", help="register a running HTTP hub instead of stdio")
            p.add_argument("--token-env", metavar="NAME", help=_TOKEN_ENV_HELP)
            p.add_argument("--force", action="store_true",
                           help="replace a different entry of the same name")
        p.set_defaults(func=cmd_install)
    p = sub.add_parser("pins", parents=[common],
                       help="tool pinning: show tools changed since first seen, accept changes")
    psub = p.add_subparsers(dest="pins_command", required=True, metavar="ACTION")
    d = psub.add_parser("diff", parents=[common], help="print what changed in pinned tools")
    d.set_defaults(func=cmd_pins)
    a = psub.add_parser("accept", parents=[common], help="re-pin SERVER or SERVER/TOOL")
    a.add_argument("target", metavar="SERVER[/TOOL]")
    a.set_defaults(func=cmd_pins)

    oauth_commands.add_parsers(sub, common, _load, run_async)
    from mcp_hub.cli.servers import add_parsers as add_server_parsers

    add_server_parsers(sub, common, cmd_add_server)
    p = sub.add_parser("import", parents=[common],
                       help="convert a client's MCP config into servers.toml entries")
    p.add_argument("client", choices=["claude-desktop", "cursor", "vscode"])
    p.add_argument("path", nargs="?", help="the client's config file (default: its usual location)")
    p.add_argument("--output", "-o", help="append to this servers.toml instead of printing")
    p.add_argument("--update", action="store_true",
                   help="refresh servers the target has already (default: skip them)")
    p.set_defaults(func=cmd_import)


_CLIENTS = ["claude-desktop", "claude-code", "cursor", "vscode"]
_TOKEN_ENV_HELP = ("with --url: the client sends 'Authorization: Bearer' with the value of "
                   "this environment variable (read by the client; the token is not written)")
_PRESPAWN_COMMANDS = frozenset({"serve", "tools", "check", "call", "status"})
#: Commands that ask a running hub when one serves the config.
_CLIENT_COMMANDS = frozenset({"tools", "call", "status"})
#: Commands whose stdout is their answer: the hub's INFO log lines stay out of the terminal.
_QUIET_COMMANDS = _CLIENT_COMMANDS


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; what follows ``--`` is the command line of ``add`` (argparse would
    not give a ``*`` positional the words after options)."""
    if "--" not in argv:
        return parser.parse_args(argv)
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    if getattr(args, "func", None) is not cmd_add_server:
        return parser.parse_args(argv)
    if args.argv:
        parser.error(f"put the whole command after `--`, not {args.argv[0]!r} before it")
    args.argv = argv[cut + 1:]
    return args


def cmd_add_server(args: argparse.Namespace) -> int:
    from mcp_hub.cli.servers import cmd_add

    return cmd_add(args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mcp-hub`` console script."""
    parser = build_parser()
    args = _parse(parser, sys.argv[1:] if argv is None else argv)
    args.remote = remote_hub(args) if args.command in _CLIENT_COMMANDS else None
    # mcp_hub.upstream.stdio.prespawn (asyncio and all) is imported only where servers start here.
    early: types.ModuleType | None = None
    if args.command in _PRESPAWN_COMMANDS and args.remote is None \
            and not getattr(args, "server", None):
        from mcp_hub.upstream.stdio import prespawn

        early = prespawn
        # Upstreams start importing their SDKs while the hub imports its own.
        prespawn.start(find_config_path(args.config))

    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # every failure is one line with the fix (--debug: traceback)
        from mcp_hub.cli.errors import report  # only on failure: the client side stays light

        return report(exc, debug=args.debug)
    finally:
        if early is not None:
            early.discard_all()


if __name__ == "__main__":
    sys.exit(main())
