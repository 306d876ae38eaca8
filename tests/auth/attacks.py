"""The token attack table: each entry names the probe server and builds request headers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable

import httpx
import jwt

from .keys import HMAC_SECRET, bearer, claims, ec_pair, hs_token, rsa_pair

RSA = rsa_pair()
EC = ec_pair()
UNAUTHORIZED_BODY = "Missing or invalid Bearer token"


def refusal_text(resp: httpx.Response) -> str:
    """The message of a 401/403 answer, checked to be the fixed shape of its binding: a
    JSON-RPC error object, or spec §11.6's ``{"error": google.rpc.Status}``."""
    body = resp.json()
    assert resp.headers["content-type"] == "application/json"
    if "jsonrpc" in body:
        assert body["error"]["code"] == {401: -32093, 403: -32094}[resp.status_code]
        return str(body["error"]["message"])
    assert list(body) == ["error"]
    assert sorted(body["error"]) == ["code", "details", "message", "status"]
    assert body["error"]["code"] == resp.status_code
    return str(body["error"]["message"])


def _unsigned(payload: dict[str, object], header: dict[str, object]) -> str:
    def seg(obj: dict[str, object]) -> str:
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return f"{seg(header)}.{seg(payload)}."


def _hs256_with_public_key_as_secret() -> str:
    header = {"alg": "HS256", "typ": "JWT"}
    segments = [
        base64.urlsafe_b64encode(json.dumps(x).encode()).rstrip(b"=")
        for x in (header, claims("mallory"))
    ]
    signing_input = b".".join(segments)
    sig = hmac.new(RSA.public_pem.encode(), signing_input, hashlib.sha256).digest()
    return (signing_input + b"." + base64.urlsafe_b64encode(sig).rstrip(b"=")).decode()


ATTACKS: dict[str, tuple[str, Callable[[], dict[str, str]]]] = {
    "no header": ("HS", dict),
    "wrong scheme": ("HS", lambda: {"Authorization": "Basic " + hs_token("alice")}),
    "bare scheme": ("HS", lambda: {"Authorization": "Bearer"}),
    "garbage token": ("HS", lambda: bearer("not.a.jwt-at-all")),
    "wrong signature": (
        "HS",
        lambda: bearer(hs_token("alice", secret="another-secret-that-is-long-enough-xxxxxx")),
    ),
    "expired": ("HS", lambda: bearer(hs_token("alice", exp=int(time.time()) - 60))),
    "nbf in the future": ("HS", lambda: bearer(hs_token("alice", nbf=int(time.time()) + 600))),
    "wrong iss": ("HS", lambda: bearer(hs_token("alice", iss="https://evil.test/"))),
    "wrong aud": ("HS", lambda: bearer(hs_token("alice", aud="someone-else"))),
    "missing sub": ("HS", lambda: bearer(hs_token(None))),
    "sub not a string": (
        "HS",
        lambda: bearer(jwt.encode({**claims(None), "sub": 12345}, HMAC_SECRET, algorithm="HS256")),
    ),
    "alg none": ("HS", lambda: bearer(_unsigned(claims("alice"), {"alg": "none", "typ": "JWT"}))),
    "alg none on RSA": (
        "RS",
        lambda: bearer(_unsigned(claims("alice"), {"alg": "none", "typ": "JWT"})),
    ),
    "HS256 with the RSA public key as secret": (
        "RS",
        lambda: bearer(_hs256_with_public_key_as_secret()),
    ),
    "RS token on the ES server": ("ES", lambda: bearer(RSA.sign(claims("alice")))),
    "10 KB token": ("HS", lambda: bearer(hs_token("alice", pad="x" * 10_240))),
}
