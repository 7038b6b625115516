"""Enterprise-Managed Authorization per caller, and callers with nothing to exchange.

Real processes: oauth2-mock-server signs the hub's callers' tokens; a second one
(``tests/fixtures/oauth/exchange_server.mjs``) plays the enterprise IdP that turns a
caller's token into an ID-JAG for the upstream's authorization server; a third
plays that authorization server, taking the ID-JAG (JWT-bearer grant) after
checking it against the IdP's keys; the upstream accepts only the last one's
tokens and records each caller's ``sub``.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.auth_support import bearer, oauth_server
from tests.exchange_parts import exchange_config, exchange_server, whoami
from tests.hubtest import http_hub, text_of
from tests.oauth_parts import protected_server

pytestmark = pytest.mark.anyio

STATIC = "static-ci-token-0123456789"


async def test_id_jag_per_caller_and_a_static_token_gets_nothing(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    async with oauth_server() as hub_idp:
        with exchange_server(hub_idp.issuer) as idp, \
                exchange_server(hub_idp.issuer, jag_issuer=idp.url) as upstream_as, \
                protected_server(upstream_as.url, calls) as upstream:
            oauth = ('grant = "id_jag"\nsubject = "caller"\nsubject_token_type = "access_token"\n'
                     f'idp_token_endpoint = "{idp.url}/token"\nidp_client_id = "hub-client"\n'
                     'idp_client_secret = "hub-secret"\n'
                     f'issuer = "{upstream_as.url}"\nclient_id = "hub-client"\n'
                     'client_secret = "hub-secret"\n')
            hub_http = f'[hub.http]\nauth_tokens = [{{ name = "ci", token = "{STATIC}" }}]\n\n'
            config = exchange_config(tmp_path, upstream, hub_idp.issuer, upstream_as.url, None,
                                     oauth=oauth, hub=hub_http)
            async with http_hub(config, tmp_path) as hub:
                with anyio.fail_after(90):
                    for sub in ("alice", "bob", "alice"):
                        result = await whoami(hub, await bearer(hub_idp, sub))
                        assert not result.is_error, text_of(result)
                        assert text_of(result).startswith(f"sub={sub} "), text_of(result)
                    # One ID-JAG and one JWT-bearer grant per identity; the third call reused.
                    assert idp.stats()["id_jags"] == {"alice": 1, "bob": 1}
                    assert upstream_as.stats()["exchanges"] == {"alice": 1, "bob": 1}
                    assert set(upstream_as.stats()["resources"]) == {upstream}

                    # The authorization server refuses Mallory's ID-JAG: the error names
                    # the upstream and the error, one grant request per call.
                    upstream_as.refuse("mallory")
                    result = await whoami(hub, await bearer(hub_idp, "mallory"))
                    assert result.is_error and "prot" in text_of(result)
                    assert "invalid_grant" in text_of(result), text_of(result)
                    assert upstream_as.stats()["refused"] == 1

                    # A static token names nobody the IdP knows: refused, nothing exchanged.
                    result = await whoami(hub, {"Authorization": f"Bearer {STATIC}"})
                    assert result.is_error, text_of(result)
                    assert "exchanges the caller's own OAuth access token" in text_of(result)
                    assert sum(idp.stats()["id_jags"].values()) == 3
                    assert upstream_as.stats()["refused"] == 1
            assert [line.split()[1] for line in calls.read_text().splitlines()] == [
                "alice", "bob", "alice"]
