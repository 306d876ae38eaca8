"""API keys over real HTTP, settings entry parsing, and JWT-or-API-key combinations."""

from __future__ import annotations

import time

import httpx
import jwt
import pytest
from apcore import Identity

from apcore_a2a.auth import (
    AnyAuthenticator,
    APIKeyAuthenticator,
    JWTAuthenticator,
    parse_api_key_entries,
)
from tests._support import TLS

from .attacks import refusal_text
from .keys import HMAC_SECRET, bearer
from .probe import serve_probe

ADMIN_KEY = "k-admin-0123456789abcdef"
PLAIN_KEY = "k-plain-0123456789abcdef"


async def test_api_key_maps_to_identity_and_rejects_others() -> None:
    auth = APIKeyAuthenticator(
        {ADMIN_KEY: Identity(id="ops", type="service", roles=("admin",)), PLAIN_KEY: "billing"},
        header="X-Agent-Key",
    )
    async with serve_probe(auth) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        resp = await client.get("/whoami", headers={"x-agent-key": ADMIN_KEY})
        assert resp.json()["scope"] == {
            "id": "ops",
            "type": "service",
            "roles": ["admin"],
            "attrs": {"auth_scheme": "apikey"},
        }
        resp = await client.get("/whoami", headers={"X-Agent-Key": PLAIN_KEY})
        assert resp.json()["scope"]["id"] == "billing"
        assert resp.json()["scope"]["type"] == "service"

        for headers in ({}, {"X-Agent-Key": "nope"}, {"X-API-Key": ADMIN_KEY}, bearer(ADMIN_KEY)):
            resp = await client.get("/whoami", headers=headers)
            assert resp.status_code == 401
            assert refusal_text(resp) == "Missing or invalid API key"
            assert resp.headers["www-authenticate"] == 'ApiKey header="X-Agent-Key"'
            assert ADMIN_KEY not in resp.text


def test_settings_entries() -> None:
    keys = parse_api_key_entries(["k-one-0123456789abcd=alice", " k-two-0123456789abcd "])
    assert keys["k-one-0123456789abcd"] == Identity(id="alice", type="service")
    anonymous = keys["k-two-0123456789abcd"]
    assert anonymous.id.startswith("apikey-")
    assert "k-two" not in anonymous.id
    assert parse_api_key_entries(["k-two-0123456789abcd"])["k-two-0123456789abcd"] == anonymous
    ops = parse_api_key_entries(["k-ops-0123456789abcd=ops: operator + admin"])
    assert ops["k-ops-0123456789abcd"] == Identity(
        id="ops", type="service", roles=("operator", "admin")
    )
    for bad in ["", "=alice", "key=", "key=ops:", "key=ops:+"]:
        with pytest.raises(ValueError, match="KEY=IDENTITY_ID"):
            parse_api_key_entries([bad])
    with pytest.raises(ValueError, match="at least one key"):
        APIKeyAuthenticator({})


async def test_jwt_or_api_key() -> None:
    auth = AnyAuthenticator(
        [JWTAuthenticator(HMAC_SECRET), APIKeyAuthenticator({ADMIN_KEY: "ops"})]
    )
    assert set(auth.security_schemes()) == {"bearer", "apiKey"}
    token = jwt.encode(
        {"sub": "alice", "exp": int(time.time()) + 600}, HMAC_SECRET, algorithm="HS256"
    )
    async with serve_probe(auth) as base, httpx.AsyncClient(base_url=base, verify=TLS) as client:
        assert (await client.get("/whoami", headers=bearer(token))).json()["var"] == "alice"
        assert (await client.get("/whoami", headers={"X-API-Key": ADMIN_KEY})).json()[
            "var"
        ] == "ops"
        # A bad token is not rescued by the absence of an API key...
        resp = await client.get("/whoami", headers=bearer("garbage"))
        assert resp.status_code == 401
        # One challenge per accepted scheme (RFC 9110 §11.6.1).
        assert resp.headers.get_list("www-authenticate") == ["Bearer", 'ApiKey header="X-API-Key"']
        # ...but a valid API key alongside a bad bearer token still identifies the caller.
        both = {**bearer("garbage"), "X-API-Key": ADMIN_KEY}
        assert (await client.get("/whoami", headers=both)).json()["var"] == "ops"
        assert (await client.get("/whoami")).status_code == 401
