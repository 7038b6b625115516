"""``mcp-hub login NAME [--no-browser]`` and ``mcp-hub logout NAME``.

The authorization URL is the only thing written to stdout (one line), so a script
can read it; progress and errors go to stderr.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcp_hub.hub_errors import ConfigError
from mcp_hub.redact import own

if TYPE_CHECKING:  # the CLI builds its parser without importing the models
    from mcp_hub.config.model import HubConfig, ServerConfig

__all__ = ["add_parsers", "token_store_line"]

Load = Callable[[argparse.Namespace], "HubConfig"]
Run = Callable[[Callable[[], Any]], Any]


def _server(config: HubConfig, name: str) -> ServerConfig:
    server = config.servers.get(name)
    if server is None:
        known = ", ".join(sorted(config.servers)) or "none"
        raise ConfigError(f"no server named {name!r} (servers: {known})")
    if server.auth != "oauth":
        from mcp_hub.config.model import AUTH_OAUTH

        raise ConfigError(f"servers.{name}: set {own(AUTH_OAUTH)} to log in to it")
    return server


def cmd_login(load: Load, run_async: Run, args: argparse.Namespace) -> int:
    from mcp_hub.upstream.oauth.attach import token_store
    from mcp_hub.upstream.oauth.login import login

    config = load(args)
    server = _server(config, args.name)
    if server.oauth.per_caller:
        raise ConfigError(f'servers.{args.name} acts as each caller (subject = "caller"): its '
                          "token is exchanged from the caller's own at each caller's first call; "
                          "there is nothing to log in")
    if server.oauth_per_user:
        raise ConfigError(f"servers.{args.name} is per user (oauth_per_user): each user connects "
                          f"their own account at the hub's /connect/{args.name} page when a call "
                          "asks for it")
    store = token_store(args.name, server)
    tools = run_async(lambda: login(args.name, server, store, open_browser=not args.no_browser,
                                    out=sys.stdout, wait_seconds=args.timeout))
    print(f"logged in to {args.name}: {tools} tools; tokens stored (encrypted) in "
          f"{store.where}", file=sys.stderr)
    return 0


def cmd_logout(load: Load, run_async: Run, args: argparse.Namespace) -> int:
    from mcp_hub.upstream.oauth.attach import token_store
    from mcp_hub.upstream.oauth.login import logout
    from mcp_hub.upstream.peruser.service import store_identity

    config = load(args)
    server = _server(config, args.name)
    identity = getattr(args, "identity", None)
    if server.oauth_per_user and not identity:
        raise ConfigError(f"servers.{args.name} is per user: name whose tokens to delete "
                          "with --identity ID")
    store = token_store(args.name, server, store_identity(identity)) if identity else (
        token_store(args.name, server))
    had = run_async(lambda: logout(store))
    whose = f" of {identity}" if identity else ""
    print(f"{args.name}: " + (f"stored tokens{whose} deleted from {store.where}" if had
                              else f"no stored tokens{whose} in {store.where}"), file=sys.stderr)
    return 0


def token_store_line(config: HubConfig) -> str | None:
    """``mcp-hub check``'s line on where OAuth tokens live; None without OAuth servers."""
    from mcp_hub.upstream.oauth.attach import oauth_status

    found = oauth_status(config.servers)
    if not found:
        return None
    store = found["token_store"]
    clients = ", ".join(f"{name}: {kind}" for name, kind in found["clients"].items())
    line = f"oauth tokens: {store['where']} (encrypted, key: {store['key']}); clients: {clients}"
    if "warning" in store:
        line += f"\nwarning: {store['warning']}"
    return line


def add_parsers(sub: Any, common: argparse.ArgumentParser, load: Load, run_async: Run) -> None:
    """Register ``login`` and ``logout`` on the CLI's subcommand parser; ``load`` reads the
    config (and sets up logging) and ``run_async`` runs a coroutine, both the CLI's own."""
    p = sub.add_parser("login", parents=[common],
                       help="log in to an OAuth upstream (auth = \"oauth\") and store its tokens")
    p.add_argument("name", metavar="NAME", help="the server's name in servers.toml")
    p.add_argument("--no-browser", action="store_true",
                   help="only print the authorization URL (stdout); do not open a browser")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds to wait for the redirect (default 300)")
    p.set_defaults(func=functools.partial(cmd_login, load, run_async))
    p = sub.add_parser("logout", parents=[common], help="delete an OAuth upstream's stored tokens")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--identity", metavar="ID",
                   help="an oauth_per_user server: the signed-in identity (sub, or token:NAME) "
                        "whose tokens to delete")
    p.set_defaults(func=functools.partial(cmd_logout, load, run_async))
