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
from tests._support import running_server

from .attacks import refusal_text
from .keys import KeyPair, bearer, rsa_pair
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
        async with serve_probe(auth) as base, httpx.AsyncClient(base_url=base) as http:
            claims = {"sub": "alice", "exp": int(time.time()) + 300}
            ok = await http.get("/whoami", headers=bearer(good.sign(claims)))
            assert (ok.status_code, ok.json()["var"]) == (200, "alice")
            refused = await http.get("/whoami", headers=bearer(odd.sign(claims)))
            assert refused.status_code == 401
            assert refusal_text(refused) == "Missing or invalid Bearer token"
