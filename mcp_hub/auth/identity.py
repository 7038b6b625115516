"""Who a request is: the identity behind a bearer token.

An :class:`Identity` comes from a static token (``token:NAME``), a verified JWT
or an introspection answer. Its :attr:`~Identity.attributes` are the strings
``[[access]]`` rules match (``sub:alice``, ``email:alice@example.com``, ``scope:mcp.read``,
``group:ops``, ``client:vscode``, ``token:ci``); they travel on the
:class:`~mcp_hub.hub.access.Caller`, so the one enforcement point decides.

An OAuth identity must be named by its token: the claim ``[auth] principal_claim``
(``sub`` by default) must hold a non-empty string. A token without it raises
:class:`MissingPrincipal` — tokens that name nobody are refused, never merged
into one shared identity that could then use the others' sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp_hub.errors import AuthError

__all__ = ["Identity", "MissingPrincipal", "identity_from_claims"]

Kind = Literal["token", "jwt", "introspection"]
#: What every static token's identity name starts with, and no other identity's may.
STATIC_PREFIX = "token:"


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated caller. ``name`` is what logs, audit and metrics show."""

    name: str
    kind: Kind
    subject: str | None = None
    client_id: str | None = None
    issuer: str | None = None
    scopes: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    expires_at: float | None = None
    attributes: frozenset[str] = field(default=frozenset(), compare=False)

    @staticmethod
    def static(name: str) -> Identity:
        """The identity of a named static token."""
        label = f"{STATIC_PREFIX}{name}"
        return Identity(name=label, kind="token", attributes=frozenset({label}))


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return [str(v) for v in value if isinstance(v, (str, int))]
    return []


class MissingPrincipal(AuthError, ValueError):
    """The token's claims do not name who it belongs to."""


def _principal(claims: Mapping[str, Any], claim: str) -> str | None:
    value = claims.get(claim)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    return text or None


def identity_from_claims(claims: Mapping[str, Any], kind: Kind, groups_claim: str,
                         principal_claim: str = "sub") -> Identity:
    """An identity from JWT or introspection claims (``scope`` or ``scp``, ``client_id`` or ``azp``).

    Its name is the ``principal_claim`` (``sub``: the subject itself; another claim:
    ``CLAIM:VALUE``); :class:`MissingPrincipal` if the claims lack it.
    """
    principal = _principal(claims, principal_claim)
    if principal is None:
        raise MissingPrincipal(f"the token names no principal (claim {principal_claim!r})")
    subject = claims.get("sub")
    subject = str(subject) if subject is not None else None
    client = claims.get("client_id") or claims.get("azp") or claims.get("cid")
    client_id = str(client) if client is not None else None
    scopes = frozenset(_strings(claims.get("scope")) + _strings(claims.get("scp")))
    groups = frozenset(_strings(claims.get(groups_claim)))
    attrs = {f"scope:{s}" for s in scopes} | {f"group:{g}" for g in groups}
    if subject:
        attrs.add(f"sub:{subject}")
    if isinstance(email := claims.get("email"), str) and email:
        attrs.add(f"email:{email}")  # for rewritten arguments' {identity.email}
    if client_id:
        attrs.add(f"client:{client_id}")
    exp = claims.get("exp")
    name = principal if principal_claim == "sub" else f"{principal_claim}:{principal}"
    if name.startswith(STATIC_PREFIX):
        # ``token:NAME`` names a static token: a token of the issuer must never pass
        # for one (it would share its sessions, stored upstream tokens and counters).
        raise MissingPrincipal(f"the token's principal may not start with {STATIC_PREFIX!r}")
    iss = claims.get("iss")
    return Identity(
        name=name, kind=kind, subject=subject, client_id=client_id,
        issuer=str(iss) if iss is not None else None, scopes=scopes, groups=groups,
        expires_at=float(exp) if isinstance(exp, (int, float)) else None,
        attributes=frozenset(attrs),
    )
