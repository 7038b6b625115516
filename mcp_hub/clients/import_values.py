"""Converting one client config entry's values for ``servers.toml``.

Client-side variables (``${input:x}``, ``${env:X}``, ``${workspaceFolder}`` …)
become hub ``${VAR}`` references, literal secrets in env, arguments, URLs and
headers are replaced by variables the user must set, and TOML values are
quoted. :class:`ImportContext` carries one import's state and warnings.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["ENV_NAME", "Client", "ImportContext", "convert_args", "convert_header",
           "convert_url", "convert_vars", "env_var_name", "guard_secret", "toml_key",
           "toml_list", "toml_str"]

Client = Literal["claude-desktop", "cursor", "vscode"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
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


def toml_str(value: str) -> str:
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


def toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else toml_str(key)


def toml_list(values: list[str]) -> str:
    return "[" + ", ".join(toml_str(v) for v in values) + "]"


@dataclass
class ImportContext:
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


def env_var_name(*parts: str) -> str:
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


def convert_vars(value: str, where: str, ctx: ImportContext) -> str:
    """Rewrite the client's ``${...}`` variables into the hub's ``${VAR}`` form."""

    def repl(match: re.Match[str]) -> str:
        inner = match.group(1)
        kind, _, arg = inner.partition(":")
        if kind == "env" and arg:
            var = arg if ENV_NAME.match(arg) else env_var_name(arg)
            return ctx.need(var, f"{where} (was ${{env:{arg}}})")
        if kind == "input" and arg:
            var = env_var_name(arg)
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
        var = env_var_name(inner)
        ctx.warnings.append(f"{where}: unknown variable ${{{inner}}} became ${{{var}}}")
        return ctx.need(var, where)

    return _CLIENT_VAR.sub(repl, value)


def guard_secret(name: str, value: str, var: str, where: str, ctx: ImportContext) -> str:
    """``value`` converted; a literal secret replaced by ``${var}`` with a warning."""
    if _looks_secret(name, value):
        var = ctx.secret_var(var, value)
        ctx.warnings.append(
            f"{where}: a literal secret was not copied; the hub reads it from the "
            f"environment variable {var} (set {var} before starting the hub)"
        )
        return ctx.need(var, where)
    return convert_vars(value, where, ctx)


def convert_args(args: list[str], server: str, where: str, ctx: ImportContext) -> list[str]:
    """Arguments converted; the value of ``--token=X`` / ``--api-key X`` guarded."""
    out: list[str] = []
    secret_flag: str | None = None
    for i, arg in enumerate(args):
        w = f"{where}.args[{i}]"
        flag_match = re.match(r"^(--?[A-Za-z0-9][A-Za-z0-9_-]*)=(.*)$", arg, re.DOTALL)
        if secret_flag is not None and not arg.startswith("-"):
            var = env_var_name(server, secret_flag.lstrip("-"))
            out.append(guard_secret(secret_flag, arg, var, w, ctx))
        elif flag_match:
            flag, value = flag_match.groups()
            var = env_var_name(server, flag.lstrip("-"))
            out.append(flag + "=" + guard_secret(flag, value, var, w, ctx))
        elif _SECRET_VALUE.match(arg):
            out.append(guard_secret("", arg, env_var_name(server, "arg", str(i)), w, ctx))
        elif _URL_CREDENTIALS.search(arg):
            out.append(_strip_url_password(arg, server, w, ctx))
        else:
            out.append(convert_vars(arg, w, ctx))
        is_secret_flag = re.match(r"^--?[A-Za-z]", arg) and "=" not in arg and \
            _SECRET_NAME.search(arg)
        secret_flag = arg if is_secret_flag else None
    return out


_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*):([^/@\s]+)@")


def _strip_url_password(value: str, server: str, where: str, ctx: ImportContext) -> str:
    """``scheme://user:PASSWORD@host`` anywhere in ``value`` → the password as ``${VAR}``."""

    def repl(match: re.Match[str]) -> str:
        password = match.group(2)
        if "${" in password:
            return match.group(0)
        var = ctx.secret_var(env_var_name(server, "password"), password)
        ctx.warnings.append(f"{where}: a password in a URL was not copied; the hub reads it "
                            f"from the environment variable {var}")
        return f"{match.group(1)}:{ctx.need(var, where)}@"

    return _URL_CREDENTIALS.sub(repl, convert_vars(value, where, ctx))


def convert_url(url: str, server: str, where: str, ctx: ImportContext) -> str:
    url = _strip_url_password(url, server, where, ctx)
    parts = urlsplit(url)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        new_pairs: list[str] = []
        changed = False
        for key, value in pairs:
            if _looks_secret(key, value):
                var = ctx.secret_var(env_var_name(server, key), value)
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


def convert_header(name: str, value: str, server: str, where: str, ctx: ImportContext) -> str:
    if "${" in value:
        return convert_vars(value, where, ctx)
    scheme_match = re.match(r"^(Bearer|Basic|Token|Bot)\s+(\S+)$", value, re.IGNORECASE)
    if scheme_match:
        var = ctx.secret_var(env_var_name(server, "token"), scheme_match.group(2))
        ctx.warnings.append(f"{where}: the credential was not copied; the hub reads it from the "
                            f"environment variable {var}")
        return f"{scheme_match.group(1)} {ctx.need(var, where)}"
    if _looks_secret(name, value) or name.lower() in {"authorization", "cookie"}:
        return guard_secret("token", value, env_var_name(server, name), where, ctx)
    return value
