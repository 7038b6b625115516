"""Turn an MCP client's JSON configuration into ``servers.toml`` entries.

``mcp-hub import claude-desktop|cursor|vscode [PATH]`` moves a user's servers
behind the hub in one step. The three clients' formats:

* Claude Desktop — ``{"mcpServers": {NAME: {"command", "args", "env"}}}`` in
  ``claude_desktop_config.json`` (Linux ``~/.config/Claude/``, macOS
  ``~/Library/Application Support/Claude/``, Windows ``%APPDATA%\\Claude\\``).
* Cursor — the same ``mcpServers`` shape plus remote entries
  (``"url"``, ``"headers"``, optional ``"type"``), in ``.cursor/mcp.json`` of the
  project or ``~/.cursor/mcp.json``; values may use ``${env:NAME}``,
  ``${userHome}``, ``${workspaceFolder}``.
* VS Code — ``{"servers": {NAME: {"type": "stdio"|"http"|"sse", ...}},
  "inputs": [...]}`` in ``.vscode/mcp.json`` (or the user-level ``mcp.json``, or
  the ``"mcp"`` key of ``settings.json``); JSON with comments; values may use
  ``${input:ID}`` (a prompt the editor shows) and the variables above.

Decisions (each one reported as a warning where it changes something):

* Server names are sanitised to ``[A-Za-z0-9_.-]`` (starting with a letter or
  digit, at most 64 characters); clashes get ``-2``, ``-3`` … suffixes.
* Literal secrets are never copied into the TOML. An env value, header, URL query
  parameter or command-line flag value that looks like a secret (by its name —
  ``*TOKEN*``, ``*KEY*``, ``*SECRET*``, ``*PASSWORD*`` … — or by its shape —
  ``ghp_…``, ``sk-…``, ``xoxb-…``, ``AKIA…``, long random strings) becomes a
  ``${VAR}`` reference that the hub interpolates from its own environment.
* ``${input:ID}`` becomes ``${ID}`` (upper-cased, non-alphanumerics → ``_``):
  the hub has no prompt, so the value comes from its environment instead.
  ``${env:NAME}`` becomes ``${NAME}``; ``${userHome}`` and ``${workspaceFolder}``
  are expanded when they can be (the workspace is the folder holding
  ``.vscode/`` or ``.cursor/``), otherwise they become ``${USER_HOME}`` /
  ``${WORKSPACE_FOLDER}``.
* Disabled servers (``"disabled": true``) are imported with ``enabled = false``.
* ``envFile`` and client-only keys (``autoApprove``, ``alwaysAllow``, ``gallery``…)
  are not carried over; a warning names them.
* A remote entry without a type is Streamable HTTP unless its URL path ends in
  ``/sse`` (the legacy SSE convention).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import tomllib
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from mcp_hub.errors import ConfigError

__all__ = ["CLIENTS", "Client", "default_config_paths", "import_client_config"]

Client = Literal["claude-desktop", "cursor", "vscode"]
CLIENTS: tuple[Client, ...] = ("claude-desktop", "cursor", "vscode")

_NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Client-side variables: ${input:x}, ${env:X}, ${userHome}, ${workspaceFolder}, ${/} …
_CLIENT_VAR = re.compile(r"\$\{([^}]*)\}")
_HUB_VAR = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(:-.*)?$")
_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|"
    r"CREDENTIAL|AUTH|COOKIE|SESSION|(^|[_-])KEY$|(^|[_-])PAT$|(^|[_-])PWD$)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"^(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}|"
    r"sk-[A-Za-z0-9_-]{16,}|sk_(live|test)_[A-Za-z0-9]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|"
    r"(AKIA|ASIA)[A-Z0-9]{16}|AIza[A-Za-z0-9_-]{30,}|npm_[A-Za-z0-9]{30,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})$"
)
_CLIENT_ONLY_KEYS = frozenset({
    "autoApprove", "alwaysAllow", "disabledTools", "gallery", "version", "description",
    "timeout", "dev", "icon", "transportType", "oauth", "auth",
})
_KNOWN_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "type", "transport",
                         "disabled", "enabled", "envFile"})
_TYPE_MAP: dict[str, str] = {
    "stdio": "stdio", "http": "http", "streamable-http": "http", "streamablehttp": "http",
    "streamable_http": "http", "sse": "sse",
}


# ----------------------------------------------------------------------------- paths


def default_config_paths(
    client: Client,
    *,
    platform: str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> list[Path]:
    """Where ``client`` keeps its MCP configuration, most specific first."""
    plat = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    cwd = Path.cwd() if cwd is None else cwd
    env = os.environ if environ is None else environ
    if plat == "darwin":
        app_support = home / "Library" / "Application Support"
    elif plat.startswith("win"):
        app_support = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        app_support = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "claude-desktop":
        return [app_support / "Claude" / "claude_desktop_config.json"]
    if client == "cursor":
        return [cwd / ".cursor" / "mcp.json", home / ".cursor" / "mcp.json"]
    if client == "vscode":
        return [cwd / ".vscode" / "mcp.json", app_support / "Code" / "User" / "mcp.json"]
    raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")


# ----------------------------------------------------------------------------- JSON(C)


def _strip_jsonc(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments and trailing commas outside strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "]}":
                i += 1  # trailing comma
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _load_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(_strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from None


# ----------------------------------------------------------------------------- TOML output


def _toml_str(value: str) -> str:
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _toml_str(key)


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


# ----------------------------------------------------------------------------- conversion


@dataclass
class _Ctx:
    """State of one import: where values come from and what the user must know."""

    client: Client
    source: Path
    home: Path
    workspace: Path | None
    inputs: dict[str, dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    needed_vars: dict[str, str] = field(default_factory=dict)  # VAR -> why
    secret_for: dict[str, str] = field(default_factory=dict)  # VAR -> the literal it replaces
    disabled: bool = False  # the server being converted is disabled

    def need(self, var: str, why: str) -> str:
        """A ``${VAR}`` reference; ``${VAR:-}`` in a disabled server, so it need not be set."""
        self.needed_vars.setdefault(var, why)
        return "${" + var + (":-}" if self.disabled else "}")

    def secret_var(self, var: str, value: str) -> str:
        """``var``, or ``var_2``… when ``var`` already stands for a different secret."""
        candidate, n = var, 2
        while self.secret_for.get(candidate, value) != value:
            candidate = f"{var}_{n}"
            n += 1
        self.secret_for[candidate] = value
        return candidate


def _env_var_name(*parts: str) -> str:
    """An environment variable name from ``parts``: ``("my-server", "api key")`` → MY_SERVER_API_KEY.

    A part that already starts with the previous one is not repeated
    (``("context7", "CONTEXT7_API_KEY")`` → CONTEXT7_API_KEY).
    """
    kept: list[str] = []
    for part in parts:
        if not part:
            continue
        if kept and re.sub(r"[^A-Za-z0-9]", "", part).upper().startswith(
                re.sub(r"[^A-Za-z0-9]", "", kept[-1]).upper()):
            kept[-1] = part
        else:
            kept.append(part)
    raw = "_".join(kept)
    name = re.sub(r"[^A-Za-z0-9]+", "_", raw).strip("_").upper()
    if not name:
        name = "VALUE"
    if name[0].isdigit():
        name = "_" + name
    return name


def _looks_secret(name: str, value: str) -> bool:
    """True when ``value`` (stored under ``name``) should not be written in clear."""
    if not value or "${" in value or re.search(r"\s", value):
        return False
    if _SECRET_VALUE.match(value):
        return True
    if _SECRET_NAME.search(name):
        # A secret-named setting with a value that is clearly not secret is kept:
        # booleans, numbers, paths, URLs without credentials, short words.
        if value.lower() in {"true", "false", "yes", "no", "on", "off", "none", "null"}:
            return False
        if re.fullmatch(r"-?\d+(\.\d+)?", value):
            return False
        if value.startswith(("/", "./", "~/")) or re.match(r"^[A-Za-z]:[\\/]", value):
            return False
        if re.match(r"^https?://", value) and not urlsplit(value).password:
            return False
        return len(value) >= 6
    return _high_entropy(value)


def _high_entropy(value: str) -> bool:
    """A long token-like string with many distinct characters (no spaces, no path)."""
    if len(value) < 32 or not re.fullmatch(r"[A-Za-z0-9_\-+=/.]+", value):
        return False
    if "/" in value and not re.search(r"[A-Z].*\d|\d.*[A-Z]", value):
        return False
    counts = Counter(value)
    entropy = -sum(c / len(value) * math.log2(c / len(value)) for c in counts.values())
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    return entropy >= 4.0 and classes >= 2


def _convert_vars(value: str, where: str, ctx: _Ctx) -> str:
    """Rewrite the client's ``${...}`` variables into the hub's ``${VAR}`` form."""

    def repl(match: re.Match[str]) -> str:
        inner = match.group(1)
        kind, _, arg = inner.partition(":")
        if kind == "env" and arg:
            var = arg if _ENV_NAME.match(arg) else _env_var_name(arg)
            return ctx.need(var, f"{where} (was ${{env:{arg}}})")
        if kind == "input" and arg:
            var = _env_var_name(arg)
            spec = ctx.inputs.get(arg, {})
            what = spec.get("description") or arg
            ctx.warnings.append(
                f"{where}: ${{input:{arg}}} ({what}) is prompted for by {ctx.client}; the hub "
                f"reads it from the environment variable {var} instead"
            )
            return ctx.need(var, f"{where} (input {arg!r}: {what})")
        if inner in ("userHome", "env:HOME"):
            return str(ctx.home)
        if inner in ("workspaceFolder", "workspaceRoot"):
            if ctx.workspace is not None:
                return str(ctx.workspace)
            ctx.warnings.append(f"{where}: ${{{inner}}} has no value outside the editor; "
                                "set WORKSPACE_FOLDER in the hub's environment")
            return ctx.need("WORKSPACE_FOLDER", where)
        if inner in ("/", "pathSeparator"):
            return os.sep
        own = _HUB_VAR.match(inner)
        if own:
            # Already the hub's syntax, ${VAR} or ${VAR:-default}: kept as written.
            ctx.needed_vars.setdefault(own.group(1), where)
            return match.group(0)
        var = _env_var_name(inner)
        ctx.warnings.append(f"{where}: unknown variable ${{{inner}}} became ${{{var}}}")
        return ctx.need(var, where)

    return _CLIENT_VAR.sub(repl, value)


def _guard_secret(name: str, value: str, var: str, where: str, ctx: _Ctx) -> str:
    """``value`` converted; a literal secret replaced by ``${var}`` with a warning."""
    if _looks_secret(name, value):
        var = ctx.secret_var(var, value)
        ctx.warnings.append(
            f"{where}: a literal secret was not copied; the hub reads it from the "
            f"environment variable {var} (set {var} before starting the hub)"
        )
        return ctx.need(var, where)
    return _convert_vars(value, where, ctx)


def _convert_args(args: list[str], server: str, where: str, ctx: _Ctx) -> list[str]:
    """Arguments converted; the value of ``--token=X`` / ``--api-key X`` guarded."""
    out: list[str] = []
    secret_flag: str | None = None
    for i, arg in enumerate(args):
        w = f"{where}.args[{i}]"
        flag_match = re.match(r"^(--?[A-Za-z0-9][A-Za-z0-9_-]*)=(.*)$", arg, re.DOTALL)
        if secret_flag is not None and not arg.startswith("-"):
            var = _env_var_name(server, secret_flag.lstrip("-"))
            out.append(_guard_secret(secret_flag, arg, var, w, ctx))
        elif flag_match:
            flag, value = flag_match.groups()
            var = _env_var_name(server, flag.lstrip("-"))
            out.append(flag + "=" + _guard_secret(flag, value, var, w, ctx))
        elif _SECRET_VALUE.match(arg):
            out.append(_guard_secret("", arg, _env_var_name(server, "arg", str(i)), w, ctx))
        elif _URL_CREDENTIALS.search(arg):
            out.append(_strip_url_password(arg, server, w, ctx))
        else:
            out.append(_convert_vars(arg, w, ctx))
        is_secret_flag = re.match(r"^--?[A-Za-z]", arg) and "=" not in arg and \
            _SECRET_NAME.search(arg)
        secret_flag = arg if is_secret_flag else None
    return out


_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*):([^/@\s]+)@")


def _strip_url_password(value: str, server: str, where: str, ctx: _Ctx) -> str:
    """``scheme://user:PASSWORD@host`` anywhere in ``value`` → the password as ``${VAR}``."""

    def repl(match: re.Match[str]) -> str:
        password = match.group(2)
        if "${" in password:
            return match.group(0)
        var = ctx.secret_var(_env_var_name(server, "password"), password)
        ctx.warnings.append(f"{where}: a password in a URL was not copied; the hub reads it "
                            f"from the environment variable {var}")
        return f"{match.group(1)}:{ctx.need(var, where)}@"

    return _URL_CREDENTIALS.sub(repl, _convert_vars(value, where, ctx))


def _convert_url(url: str, server: str, where: str, ctx: _Ctx) -> str:
    url = _strip_url_password(url, server, where, ctx)
    parts = urlsplit(url)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        new_pairs: list[str] = []
        changed = False
        for key, value in pairs:
            if _looks_secret(key, value):
                var = ctx.secret_var(_env_var_name(server, key), value)
                ctx.warnings.append(f"{where}: the secret query parameter {key!r} was not "
                                    f"copied; the hub reads it from the environment variable "
                                    f"{var}")
                new_pairs.append(f"{quote(key, safe='')}={ctx.need(var, where)}")
                changed = True
            else:
                new_pairs.append(f"{quote(key, safe='')}={quote(value, safe='${}:/@,')}")
        if changed:
            query = "&".join(new_pairs)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))


def _convert_header(name: str, value: str, server: str, where: str, ctx: _Ctx) -> str:
    if "${" in value:
        return _convert_vars(value, where, ctx)
    scheme_match = re.match(r"^(Bearer|Basic|Token|Bot)\s+(\S+)$", value, re.IGNORECASE)
    if scheme_match:
        var = ctx.secret_var(_env_var_name(server, "token"), scheme_match.group(2))
        ctx.warnings.append(f"{where}: the credential was not copied; the hub reads it from the "
                            f"environment variable {var}")
        return f"{scheme_match.group(1)} {ctx.need(var, where)}"
    if _looks_secret(name, value) or name.lower() in {"authorization", "cookie"}:
        return _guard_secret("token", value, _env_var_name(server, name), where, ctx)
    return value


def _sanitise_name(name: str, taken: set[str]) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip())
    clean = re.sub(r"^[^A-Za-z0-9]+", "", clean)[:64] or "server"
    candidate, n = clean, 2
    while candidate.lower() in taken:
        suffix = f"-{n}"
        candidate = clean[: 64 - len(suffix)] + suffix
        n += 1
    taken.add(candidate.lower())
    return candidate


def _str_list(value: Any, where: str, ctx: _Ctx) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        ctx.warnings.append(f"{where}: expected a list; ignored")
        return []
    return [v if isinstance(v, str) else json.dumps(v) for v in value]


def _str_map(value: Any, where: str, ctx: _Ctx) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        ctx.warnings.append(f"{where}: expected an object; ignored")
        return {}
    out: dict[str, str] = {}
    for k, v in value.items():
        if v is None:
            continue
        out[str(k)] = v if isinstance(v, str) else json.dumps(v) if not isinstance(
            v, bool) else str(v).lower()
    return out


def _server_block(raw_name: str, entry: Any, name: str, ctx: _Ctx) -> list[str] | None:
    where = f"{raw_name}"
    if not isinstance(entry, dict):
        ctx.warnings.append(f"{where}: not an object; skipped")
        return None
    lines = [f"[servers.{_toml_key(name)}]"]
    ctx.disabled = entry.get("disabled") is True or entry.get("enabled") is False
    kind_raw = entry.get("type", entry.get("transport"))
    kind = _TYPE_MAP.get(str(kind_raw).lower().replace(" ", "")) if kind_raw else None
    if kind_raw and kind is None:
        ctx.warnings.append(f"{where}: unknown type {kind_raw!r}; guessed from the entry")
    command = entry.get("command")
    url = entry.get("url") or entry.get("serverUrl")
    if command and url:
        ctx.warnings.append(f"{where}: has both 'command' and 'url'; kept the command")
        url = None
    if not command and not url:
        ctx.warnings.append(f"{where}: neither 'command' nor 'url'; skipped")
        return None
    if command:
        if not isinstance(command, str):
            ctx.warnings.append(f"{where}: 'command' is not a string; skipped")
            return None
        lines.append(f"command = {_toml_str(_convert_vars(command, where + '.command', ctx))}")
        args = _convert_args(_str_list(entry.get("args"), where + ".args", ctx), name, where,
                             ctx)
        if args:
            lines.append(f"args = {_toml_list(args)}")
        if isinstance(entry.get("cwd"), str) and entry["cwd"]:
            lines.append(f"cwd = {_toml_str(_convert_vars(entry['cwd'], where + '.cwd', ctx))}")
        if kind not in (None, "stdio"):
            ctx.warnings.append(f"{where}: type {kind_raw!r} with a command; imported as stdio")
    else:
        if not isinstance(url, str):
            ctx.warnings.append(f"{where}: 'url' is not a string; skipped")
            return None
        if kind in (None, "stdio"):
            kind = "sse" if urlsplit(url).path.rstrip("/").endswith("/sse") else "http"
        lines.append(f"url = {_toml_str(_convert_url(url, name, where + '.url', ctx))}")
        lines.append(f"transport = {_toml_str(kind)}")
    if ctx.disabled:
        lines.append("enabled = false")
        ctx.warnings.append(f"{where}: disabled in {ctx.client}; imported with enabled = false "
                            "(its ${VAR:-} references need setting before you enable it)")
    if entry.get("envFile"):
        ctx.warnings.append(f"{where}: envFile {entry['envFile']!r} is not read by the hub; "
                            "put its variables in the hub's environment or in env")
    ignored = sorted(k for k in entry if k not in _KNOWN_KEYS and k != "serverUrl")
    if ignored:
        client_only = [k for k in ignored if k in _CLIENT_ONLY_KEYS]
        other = [k for k in ignored if k not in _CLIENT_ONLY_KEYS]
        if client_only:
            ctx.warnings.append(f"{where}: client-only settings not carried over: "
                                f"{', '.join(client_only)}")
        if other:
            ctx.warnings.append(f"{where}: unknown keys ignored: {', '.join(other)}")

    env = _str_map(entry.get("env"), where + ".env", ctx)
    if env and command:
        lines.append("")
        lines.append(f"[servers.{_toml_key(name)}.env]")
        for key, value in env.items():
            w = f"{where}.env.{key}"
            var = key if _ENV_NAME.match(key) else _env_var_name(name, key)
            lines.append(f"{_toml_key(key)} = {_toml_str(_guard_secret(key, value, var, w, ctx))}")
    elif env:
        ctx.warnings.append(f"{where}: 'env' has no meaning for a remote server; ignored")
    headers = _str_map(entry.get("headers"), where + ".headers", ctx)
    if headers and url:
        lines.append("")
        lines.append(f"[servers.{_toml_key(name)}.headers]")
        for key, value in headers.items():
            w = f"{where}.headers.{key}"
            lines.append(f"{_toml_key(key)} = "
                         f"{_toml_str(_convert_header(key, value, name, w, ctx))}")
    elif headers:
        ctx.warnings.append(f"{where}: 'headers' has no meaning for a stdio server; ignored")
    return lines


def _servers_of(client: Client, data: Any, path: Path) -> tuple[dict[str, Any], list[Any]]:
    """The server table and VS Code ``inputs`` of a parsed client config."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    inputs: list[Any] = []
    if client == "vscode":
        mcp_key = data.get("mcp")
        body: dict[str, Any] = mcp_key if isinstance(mcp_key, dict) else data
        servers = body.get("servers")
        if servers is None and "mcpServers" in body:
            servers = body["mcpServers"]
        inputs = body.get("inputs") or []
    else:
        servers = data.get("mcpServers")
        if servers is None and "servers" in data:
            servers = data["servers"]
    if servers is None:
        key = "servers" if client == "vscode" else "mcpServers"
        raise ConfigError(f"{path}: no {key!r} object: is this a {client} MCP configuration?")
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: the server list must be a JSON object of NAME: entry")
    return servers, inputs if isinstance(inputs, list) else []


def _workspace_of(client: Client, path: Path, home: Path) -> Path | None:
    """The project folder of a project-level config (``PROJECT/.vscode/mcp.json``)."""
    parent = path.resolve().parent
    if client == "vscode" and parent.name == ".vscode":
        return parent.parent
    if client == "cursor" and parent.name == ".cursor" and parent.parent != home.resolve():
        return parent.parent
    return None


def import_client_config(
    client: Client,
    path: Path | None = None,
    *,
    existing_names: Collection[str] = (),
    platform: str | None = None,
    home: Path | None = None,
    cwd: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> tuple[str, list[str]]:
    """Read ``client``'s MCP config and return ``(servers.toml text, warnings)``.

    ``path`` defaults to the first existing file of :func:`default_config_paths`.
    ``existing_names`` are server names already in the target ``servers.toml``;
    imported servers with those names are renamed rather than clash. Raises
    :class:`~mcp_hub.errors.ConfigError` when no file is found or it is not a
    config of that client.
    """
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}; choose one of {', '.join(CLIENTS)}")
    home = Path.home() if home is None else home
    warnings: list[str] = []
    if path is None:
        candidates = default_config_paths(client, platform=platform, home=home, cwd=cwd,
                                          environ=environ)
        found = [p for p in candidates if p.is_file()]
        if not found:
            tried = ", ".join(str(p) for p in candidates)
            raise ConfigError(f"no {client} MCP configuration found (looked at {tried}); "
                              "pass its path")
        path = found[0]
        for other in found[1:]:
            warnings.append(f"also found {other}; import it with: mcp-hub import {client} "
                            f"{other}")
    data = _load_json(path)
    servers, raw_inputs = _servers_of(client, data, path)
    inputs = {str(i.get("id")): i for i in raw_inputs if isinstance(i, dict) and i.get("id")}
    ctx = _Ctx(client=client, source=path, home=home, workspace=_workspace_of(client, path, home),
               inputs=inputs, warnings=warnings)
    taken = {n.lower() for n in existing_names}
    blocks: list[str] = []
    imported: list[str] = []
    for raw_name, entry in servers.items():
        name = _sanitise_name(str(raw_name), taken)
        if name != raw_name:
            ctx.warnings.append(f"server {raw_name!r} imported as {name!r} (names use "
                                "letters, digits, '_', '.', '-' and must be unique)")
        block = _server_block(str(raw_name), entry, name, ctx)
        if block is None:
            taken.discard(name.lower())
            continue
        blocks.append("\n".join(block))
        imported.append(name)
    head = [f"# Imported from {client}: {path}"]
    if ctx.needed_vars:
        head.append("# The hub reads these from its environment (set them before it starts):")
        for var, why in ctx.needed_vars.items():
            head.append(f"#   {var}  ({why})")
    if not imported:
        head.append("# (no servers found)")
    text = "\n".join(head) + "\n\n" + "\n\n".join(blocks) + ("\n" if blocks else "")
    _self_check(text, path)
    return text, ctx.warnings


def _self_check(text: str, path: Path) -> None:
    """The output must be TOML the hub accepts; a failure here is a bug, said plainly."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - guarded by tests
        raise ConfigError(f"{path}: could not be converted to valid TOML ({exc}); "
                          "please report this") from None
