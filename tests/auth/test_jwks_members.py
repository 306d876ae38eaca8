"""One odd member of a key set costs only itself: a member PyJWT cannot load in any way
(``"alg": "none"``) leaves the other keys usable, and a private key published by mistake
verifies nothing (a 401, never a 500), on a real JWKS endpoint and a real agent."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import jwt
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.auth import JWTAuthenticator
from tests._support import TLS, running_server

from .attacks import refusal_text
from .keys import KeyPair, bearer, ec_pair, rsa_pair
from .probe import serve_probe


def private_jwk(pair: KeyPair) -> dict[str, Any]:
    """*pair*'s private key as a JWK (``d``, ``p``, ``q``...): what an IdP must never publish."""
    member: dict[str, Any] = json.loads(jwt.get_algorithm_by_name("RS256").to_jwk(pair.private))
    return {**member, "kid": pair.kid, "use": "sig", "alg": "RS256"}


ODD: dict[str, Any] = {
    "alg none": lambda pair: {**pair.jwk(), "alg": "none"},
    "a private key": private_jwk,
}


@pytest.mark.parametrize("case", list(ODD))
async def test_an_odd_member_costs_only_itself(case: str) -> None:
    good, odd = rsa_pair("good"), rsa_pair("odd")
    body = json.dumps({"keys": [ODD[case](odd), good.jwk()]}).encode()

    async def jwks(request: Request) -> Response:
        return Response(body, media_type="application/json")

    async with running_server(Starlette(routes=[Route("/jwks.json", jwks)])) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/jwks.json")
        async with serve_probe(auth) as base, httpx.AsyncClient(base_url=base, verify=TLS) as http:
            claims = {"sub": "alice", "exp": int(time.time()) + 300}
            ok = await http.get("/whoami", headers=bearer(good.sign(claims)))
            assert (ok.status_code, ok.json()["var"]) == (200, "alice")
            refused = await http.get("/whoami", headers=bearer(odd.sign(claims)))
            assert refused.status_code == 401
            assert refusal_text(refused) == "Missing or invalid Bearer token"


@pytest.mark.parametrize("declares_alg", [True, False])
async def test_keys_of_two_types_sharing_a_kid_each_verify_their_tokens(declares_alg: bool) -> None:
    # RFC 7517 4.5: keys of different kty may share a kid; the set's last one stood for the
    # kid alone, so every token of the other type was refused.
    pairs = [rsa_pair("shared"), ec_pair("shared")]
    for pair in pairs:
        pair.declares_alg = declares_alg
    body = json.dumps({"keys": [pair.jwk() for pair in pairs]}).encode()

    async def jwks(request: Request) -> Response:
        return Response(body, media_type="application/json")

    async with running_server(Starlette(routes=[Route("/jwks.json", jwks)])) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/jwks.json")
        async with serve_probe(auth) as base, httpx.AsyncClient(base_url=base, verify=TLS) as http:
            for pair in pairs:
                claims = {"sub": pair.alg, "exp": int(time.time()) + 300}
                ok = await http.get("/whoami", headers=bearer(pair.sign(claims)))
                assert (ok.status_code, ok.text[:200]) == (200, ok.text[:200]), pair.alg
                assert ok.json()["var"] == pair.alg
            assert auth.jwks is not None and auth.jwks.fetches == 1
