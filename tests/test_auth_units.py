"""Sign-in pieces without a network: rules through AccessPolicy, config checks,
the audit writer, JWT checks against a local key set, metadata paths."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp_hub.auth.audit import AuditLog
from mcp_hub.auth.discovery import IssuerKeys, metadata_urls
from mcp_hub.auth.identity import Identity, identity_from_claims
from mcp_hub.auth.jwt_verify import InvalidToken, JwtVerifier
from mcp_hub.auth.metadata import endpoint_of, resource_path
from mcp_hub.auth.settings import AuditConfig
from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError
from mcp_hub.hub.access import Caller
from mcp_hub.hub.core import Hub
from tests.security.test_access_policy import Owners

pytestmark = pytest.mark.anyio

ISSUER = "https://idp.example.com/realms/acme"

RULES = """
[profiles.narrow]
toolsets = ["mcp-a"]
[[access]]
match = "group:ops"
[[access]]
match = "sub:alice"
profile = "narrow"
[[access]]
match = "token:ci"
profile = "narrow"
"""


def _caller(identity: Identity, profile: str | None = None) -> Caller:
    return Caller(profile=profile, identity=identity.name, attributes=identity.attributes)


def test_rules_decide_through_the_access_policy() -> None:
    config = parse_config(RULES)
    from mcp_hub.hub.access import AccessControl
    from mcp_hub.registry.tool_registry import ToolRegistry

    holder = {"config": config}
    access = AccessControl(lambda: holder["config"], ToolRegistry(), Owners())
    alice = identity_from_claims({"sub": "alice", "scope": "mcp"}, "jwt", "groups")
    ops = identity_from_claims({"sub": "bob", "groups": ["ops"]}, "jwt", "groups")
    stranger = identity_from_claims({"sub": "eve"}, "jwt", "groups")
    ci = Identity.static("ci")
    assert access.policy(_caller(ops)).unrestricted
    for who in (alice, ci):
        policy = access.policy(_caller(who))
        assert policy.server("a") and not policy.server("b")
    nothing = access.policy(_caller(stranger))
    assert not nothing.server("a") and not nothing.tool("a_echo")
    # The endpoint's profile and the identity's rule both apply.
    both = access.policy(_caller(ops, "narrow"))
    assert both.server("a") and not both.server("b")
    # Rules hot-reload with the config: the next policy follows the new file.
    holder["config"] = parse_config(RULES.replace('match = "sub:alice"', 'match = "sub:nobody"'))
    assert not access.policy(_caller(alice)).server("a")
    # Without rules, an identity reaches what its endpoint reaches.
    holder["config"] = parse_config("")
    assert access.policy(_caller(stranger)).unrestricted


@pytest.mark.parametrize(("text", "error"), [
    ('[[access]]\nmatch = "sub:x"\nprofile = "missing"\n', "no [profiles.missing]"),
    ('[[access]]\nmatch = "user:x"\n', "write sub:ID"),
    (f'[auth]\nissuer = "{ISSUER}"\nalgorithms = ["HS256"]\n', "only asymmetric"),
    (f'[auth]\nissuer = "{ISSUER}"\nalgorithms = ["none"]\n', "only asymmetric"),
    (f'[auth]\nissuer = "{ISSUER}"\n', "[auth] needs [auth] audience or [hub.http] public_url"),
    ('[hub.http]\ntrusted_proxies = ["10.0.0.0/33"]\n', "write an IP address or a CIDR"),
])
def test_bad_sign_in_config_is_an_error(text: str, error: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    assert error in str(caught.value)


def test_named_and_plain_static_tokens() -> None:
    config = parse_config('[hub.http]\nauth_tokens = ["plain-token-0123456789", '
                          '{ name = "ci", token = "named-token-0123456789" }]\n')
    assert config.hub.http.token_entries() == [("token-1", "plain-token-0123456789"),
                                               ("ci", "named-token-0123456789")]
    with pytest.raises(ConfigError):
        parse_config('[hub.http]\nauth_tokens = [{ name = "ci", token = "short" }]\n')


def test_audit_hides_arguments_unless_asked_and_redacts_them(tmp_path: Path) -> None:
    args = {"query": "canary-value-123", "password": "hunter2-secret", "nested": {"api_key": "k"}}
    lines = {}
    for include in (False, True):
        path = tmp_path / f"audit-{include}.jsonl"
        log = AuditLog(AuditConfig(path=str(path), include_arguments=include))
        log.call(identity="alice", client_id="c", session="s", tool="a_t", server="a", outcome="ok",
                 seconds=0.001, arguments=args, result_size=10)
        assert log.flush(5)
        lines[include] = path.read_text()
    assert "canary-value-123" not in lines[False]
    assert json.loads(lines[False])["arguments_bytes"] == len(json.dumps(args).encode())
    recorded = json.loads(lines[True])["arguments"]
    assert recorded["query"] == "canary-value-123"
    assert recorded["password"] == "[REDACTED]" and recorded["nested"]["api_key"] == "[REDACTED]"


def test_a_full_disk_is_a_logged_error_not_a_failed_call(caplog: pytest.LogCaptureFixture) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("/dev/full is Linux only")
    log = AuditLog(AuditConfig(path="/dev/full"))
    with caplog.at_level(logging.ERROR, logger="mcp_hub.audit"):
        for _ in range(3):
            log.call(identity="a", client_id=None, session=None, tool="t", server="s", outcome="ok",
                     seconds=0.0, arguments={}, result_size=0)
        assert log.flush(5)
    assert log.write_errors >= 1 and log.dropped == 3
    assert sum("cannot write the audit log" in r.message for r in caplog.records) == 1


def test_metadata_paths() -> None:
    assert endpoint_of("/mcp") == "/mcp" and endpoint_of("/p/dev/mcp/") == "/p/dev/mcp"
    assert endpoint_of("/p/dev/messages/") == "/p/dev/sse" and endpoint_of("/status.json") == "/mcp"
    profiles = frozenset({"dev"})
    base = "/.well-known/oauth-protected-resource"
    assert resource_path(base, profiles) == "/mcp"
    assert resource_path(base + "/mcp/", profiles) == "/mcp/"
    assert resource_path(base + "/p/dev/mcp", profiles) == "/p/dev/mcp"
    assert resource_path(base + "/p/other/mcp", profiles) is None
    assert resource_path(base + "/etc/passwd", profiles) is None
    assert metadata_urls(ISSUER) == [
        "https://idp.example.com/.well-known/oauth-authorization-server/realms/acme",
        "https://idp.example.com/.well-known/openid-configuration/realms/acme",
        "https://idp.example.com/realms/acme/.well-known/openid-configuration",
    ]


class _KeyServer:
    """An issuer's metadata and JWKS behind httpx2's MockTransport; counts key-set fetches."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}
        self.fetches = 0

    def add(self, kid: str) -> Any:
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
        self.keys[kid] = {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}
        return private

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/jwks"):
            self.fetches += 1
            return httpx2.Response(200, json={"keys": list(self.keys.values())})
        if request.url.path == "/.well-known/oauth-authorization-server/realms/acme":
            return httpx2.Response(200, json={"issuer": ISSUER, "jwks_uri": "https://idp.example.com/jwks"})
        return httpx2.Response(404)


def _sign(private: Any, kid: str, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "sub": "alice", "aud": "https://hub/mcp", "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, private, algorithm="RS256", headers={"kid": kid})


async def test_jwt_checks_and_an_unknown_kid_refetches_once() -> None:
    server = _KeyServer()
    first = server.add("k1")
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server.handle))
    keys = IssuerKeys(ISSUER, refresh_min_seconds=0, client=client)
    verifier = JwtVerifier(keys, algorithms=["RS256"], leeway=5)
    token = _sign(first, "k1")
    assert (await verifier.verify(token))["sub"] == "alice"
    assert (await verifier.verify(token))["sub"] == "alice"
    assert server.fetches == 1  # the second check came from the cache
    for bad, why in [(_sign(first, "k1", exp=int(time.time()) - 60), "expired"),
                     (_sign(first, "k1", nbf=int(time.time()) + 600), "not valid yet"),
                     (_sign(first, "k1", iss="https://other"), "another issuer")]:
        with pytest.raises(InvalidToken, match=why):
            await verifier.verify(bad)
    second = server.add("k2")
    assert (await verifier.verify(_sign(second, "k2")))["sub"] == "alice"
    assert server.fetches == 2
    # A made-up kid costs one fetch, then is remembered as unknown.
    for _ in range(3):
        with pytest.raises(InvalidToken, match="does not publish"):
            await verifier.verify(_sign(second, "made-up"))
    assert server.fetches == 3
    await client.aclose()


async def test_concurrent_unknown_kids_share_one_key_set_fetch() -> None:
    """Single flight: 40 lookups of made-up kids and 10 of a newly published key, all
    arriving within the spacing of fetches, make one fetch (not one each, in a queue of
    2 s turns); the new key is found by all 10."""
    import anyio

    server = _KeyServer()
    first = server.add("k1")
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server.handle))
    keys = IssuerKeys(ISSUER, refresh_min_seconds=2, client=client)
    verifier = JwtVerifier(keys, algorithms=["RS256"], leeway=5)
    assert (await verifier.verify(_sign(first, "k1")))["sub"] == "alice"
    second = server.add("k2")
    outcomes: list[str] = []

    async def check(token: str) -> None:
        try:
            outcomes.append((await verifier.verify(token))["sub"])
        except InvalidToken:
            outcomes.append("refused")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(check, _sign(second, "k2", jti=str(i)) if i % 5 == 0
                              else _sign(first, f"made-up-{i}"))
    assert outcomes.count("alice") == 10 and outcomes.count("refused") == 40
    assert server.fetches == 2 and keys.fetches == 2
    await client.aclose()


async def test_hub_status_counts_calls_per_identity() -> None:
    async with Hub(parse_config("")) as hub:
        await hub.call_tool("hub_status", {}, profile=Caller(identity="alice", attributes=frozenset({"sub:alice"})))
        assert hub.status()["identities"]["alice"]["ok"] == 1


async def test_tools_list_changed_only_reaches_connections_whose_tools_changed() -> None:
    from mcp_hub.hub.sessions import SessionTracker

    class Conn:
        def __init__(self, who: str) -> None:
            self.state: dict[str, Any] = {"who": who}
            self.told = 0

        async def send_tool_list_changed(self) -> None:
            self.told += 1

    from contextlib import AsyncExitStack

    tools = {"alice": 1, "ci": 1}
    tracker = SessionTracker()
    tracker.visible = lambda conn: tools[conn.state["who"]]
    alice, ci = Conn("alice"), Conn("ci")
    async with AsyncExitStack() as stack:
        for conn in (alice, ci):
            conn.exit_stack = stack  # type: ignore[attr-defined]
            tracker.add(conn)  # type: ignore[arg-type]
        tools["ci"] = 2
        await tracker._broadcast("tools")
        assert (alice.told, ci.told) == (0, 1)
        tools["alice"] = 2
        await tracker._broadcast("tools")
        assert (alice.told, ci.told) == (1, 1)
        tracker.visible = None  # without a digest every connection is told
        await tracker._broadcast("tools")
        assert (alice.told, ci.told) == (2, 2)


def test_the_audience_never_comes_from_a_host_header_anyone_can_send() -> None:
    from mcp_hub.auth.authenticator import Authenticator
    from mcp_hub.auth.settings import AuthConfig

    def authn(auth: AuthConfig, public_url: str | None) -> Authenticator:
        return Authenticator(tokens=[], auth=auth, public_url=public_url, name="hub",
                             profiles=frozenset, rules=list)

    scope = {"type": "http", "path": "/p/dev/mcp", "scheme": "http",
             "headers": [(b"host", b"other-hub.example.com"), (b"x-forwarded-proto", b"https"),
                         (b"x-forwarded-host", b"proxy.example.com")]}
    plain, fixed = AuthConfig(issuer=ISSUER), AuthConfig(issuer=ISSUER, audience="https://hub.example.com/mcp")
    # Only what the config says, whatever the request's headers.
    assert authn(fixed, None).audiences(scope) == {"https://hub.example.com/mcp"}
    assert authn(plain, "https://hub.example.com").audiences(scope) == {
        "https://hub.example.com/mcp", "https://hub.example.com/p/dev/mcp"}
    assert authn(fixed, "https://hub.example.com").audiences(scope) == {
        "https://hub.example.com/mcp", "https://hub.example.com/p/dev/mcp"}
    assert authn(plain, None).audiences(scope) == set()  # the config refuses this (see below)


def test_identity_needs_its_principal_claim() -> None:
    from mcp_hub.auth.identity import MissingPrincipal

    for claims in ({}, {"client_id": "app"}, {"sub": ""}, {"sub": ["a"]}, {"sub": True}):
        with pytest.raises(MissingPrincipal, match="claim 'sub'"):
            identity_from_claims(claims, "jwt", "groups")
    by_client = identity_from_claims({"client_id": "app", "scope": "mcp"}, "jwt", "groups", "client_id")
    assert by_client.name == "client_id:app" and "client:app" in by_client.attributes
    assert identity_from_claims({"sub": "alice"}, "jwt", "groups").name == "alice"


def test_a_token_cannot_pass_for_a_static_token() -> None:
    """A principal of ``token:NAME`` would share the static token NAME's sessions, stored
    upstream tokens and counters: refused, whichever claim names it."""
    from mcp_hub.auth.identity import MissingPrincipal

    with pytest.raises(MissingPrincipal, match="may not start with 'token:'"):
        identity_from_claims({"sub": "token:ci"}, "jwt", "groups")
    with pytest.raises(MissingPrincipal, match="may not start with 'token:'"):
        identity_from_claims({"sub": "x", "token": "ci"}, "introspection", "groups", "token")
    assert identity_from_claims({"sub": "tokens:ci"}, "jwt", "groups").name == "tokens:ci"


def test_trusted_proxies_decide_who_may_forward() -> None:
    from mcp_hub.downstream.http.forwarded import TrustedProxies

    proxies = TrustedProxies(["10.0.0.0/8", "::1", "192.168.1.5"])
    assert proxies.trusts("10.1.2.3") and proxies.trusts("::1") and proxies.trusts("::ffff:192.168.1.5")
    assert not proxies.trusts("127.0.0.1") and not proxies.trusts("192.168.1.6")
    assert not proxies.trusts("not-an-ip")
    # The client is the nearest hop that is not a trusted proxy; what it claims before that is ignored.
    assert proxies.client_of("1.2.3.4, 203.0.113.9, 10.0.0.2", "10.0.0.1") == "203.0.113.9"
    assert proxies.client_of("10.0.0.3", "10.0.0.1") == "10.0.0.3"
    assert not TrustedProxies([])
