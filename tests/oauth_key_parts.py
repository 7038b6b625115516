"""The key-checking authorization server of the key-grant tests and bench
(``tests/fixtures/oauth/key_auth_server.mjs``: oauth2-mock-server from npm verifying
client assertions, workload JWTs and DPoP proofs), and keys and JWTs to give it."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.hubtest import ROOT
from tests.oauth_parts import require_parts

KEY_SERVER = ROOT / "tests" / "fixtures" / "oauth" / "key_auth_server.mjs"


@dataclass
class KeyServer:
    """The running server: its issuer URL and its test controls."""

    url: str

    def requests(self) -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = httpx2.get(f"{self.url}/test/stats", timeout=5).json()[
            "requests"]
        return data

    def trust(self, **pems: str) -> None:
        httpx2.post(f"{self.url}/test/keys", json=pems, timeout=5).raise_for_status()

    def plain_token(self) -> str:
        """A Bearer token from a plain client_credentials request (for a static header)."""
        answer = httpx2.post(f"{self.url}/token", data={"grant_type": "client_credentials",
                                                        "client_id": "static"}, timeout=5)
        answer.raise_for_status()
        token: str = answer.json()["access_token"]
        return token

    def refuse(self, error: str | None) -> None:
        httpx2.post(f"{self.url}/test/refuse", json={"error": error}, timeout=5).raise_for_status()


@contextmanager
def key_server(token_seconds: int) -> Iterator[KeyServer]:
    """The server, its tokens living ``token_seconds``."""
    node = require_parts()
    proc = subprocess.Popen([node, str(KEY_SERVER), str(token_seconds)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()  # bounded: the process prints or exits
        assert line.startswith("READY "), f"key auth server did not start: {line!r}"
        yield KeyServer(line.split(" ", 1)[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def pems(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> tuple[str, str]:
    """The private key's PKCS#8 PEM and its public key's PEM."""
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public.decode()


def workload_jwt(key: rsa.RSAPrivateKey, audience: str, sub: str) -> str:
    """A workload's JWT as a platform issues it (ten minutes, RS256)."""
    now = int(time.time())
    return jwt.encode({"iss": "https://idp.example", "sub": sub, "aud": audience, "iat": now,
                       "exp": now + 600}, key, algorithm="RS256")
