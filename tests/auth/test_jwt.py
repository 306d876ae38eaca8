"""JWTAuthenticator over real HTTP: accepted algorithms, claim mapping, the attack table."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import httpx
import jwt
import pytest
import pytest_asyncio

from apcore_a2a.auth import ClaimMapping, InvalidCredentials, JWTAuthenticator
from tests._support import TLS

from .attacks import ATTACKS, EC, RSA, UNAUTHORIZED_BODY, refusal_text
from .keys import (
    AUDIENCE,
    HMAC_SECRET,
    ISSUER,
    bearer,
    claims,
    hs_token,
)
from .probe import serve_probe

module_loop = pytest.mark.asyncio(loop_scope="module")
#: What the authenticator adds to every identity: how the caller authenticated.
STAMP = {"auth_scheme": "jwt", "auth_issuer": ISSUER}


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def servers() -> AsyncIterator[dict[str, str]]:
    """One probe server per key type, all with issuer + audience checks."""
    common = {"issuer": ISSUER, "audience": AUDIENCE}
    hs = JWTAuthenticator(HMAC_SECRET, algorithms=["HS256", "HS384", "HS512"], **common)
    rs = JWTAuthenticator(RSA.public_pem, **common)
    es = JWTAuthenticator(EC.public_pem, **common)
    mapped = JWTAuthenticator(
        HMAC_SECRET,
        claim_mapping=ClaimMapping(
            id="uid", type="kind", roles="realm_access.roles", attrs=("email", "https://x.io/org")
        ),
        require_claims=["uid"],
        leeway=30,
        **common,
    )
    async with (
        serve_probe(hs) as hs_url,
        serve_probe(rs) as rs_url,
        serve_probe(es) as es_url,
        serve_probe(mapped) as mapped_url,
    ):
        yield {"HS": hs_url, "RS": rs_url, "ES": es_url, "mapped": mapped_url}


async def whoami(base: str, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(verify=TLS) as client:
        return await client.get(base + "/whoami", headers=headers)


@module_loop
@pytest.mark.parametrize("alg", ["HS256", "HS384", "HS512"])
async def test_hmac_algorithms_accepted(servers: dict[str, str], alg: str) -> None:
    resp = await whoami(servers["HS"], bearer(hs_token("alice", alg=alg)))
    assert resp.status_code == 200
    assert resp.json()["scope"] == {"id": "alice", "type": "user", "roles": [], "attrs": STAMP}
    assert resp.json()["var"] == "alice"


@module_loop
@pytest.mark.parametrize(("server", "pair"), [("RS", RSA), ("ES", EC)])
async def test_asymmetric_algorithms_accepted(
    servers: dict[str, str], server: str, pair: object
) -> None:
    token = pair.sign(claims("bob", roles=["viewer", "ops"], type="service"))  # type: ignore[attr-defined]
    resp = await whoami(servers[server], bearer(token))
    assert resp.status_code == 200
    assert resp.json()["scope"] == {
        "id": "bob",
        "type": "service",
        "roles": ["viewer", "ops"],
        "attrs": STAMP,
    }


@module_loop
async def test_claim_mapping_nested_roles_attrs_and_leeway(servers: dict[str, str]) -> None:
    token = hs_token(
        None,
        uid="u-42",
        kind="agent",
        realm_access={"roles": ["admin"]},
        email="u42@example.com",
        **{"https://x.io/org": "acme"},
        exp=int(time.time()) - 10,  # expired, but inside the 30 s leeway
    )
    resp = await whoami(servers["mapped"], bearer(token))
    assert resp.status_code == 200
    assert resp.json()["scope"] == {
        "id": "u-42",
        "type": "agent",
        "roles": ["admin"],
        "attrs": {"email": "u42@example.com", "https://x.io/org": "acme", **STAMP},
    }


@module_loop
async def test_roles_as_space_separated_string(servers: dict[str, str]) -> None:
    resp = await whoami(servers["HS"], bearer(hs_token("carol", roles="read write")))
    assert resp.json()["scope"]["roles"] == ["read", "write"]


@module_loop
@pytest.mark.parametrize(
    ("granted", "scopes"),
    [
        ({"scope": "a2a:call profile"}, ["a2a:call", "profile"]),
        ({"scp": ["a2a:call"]}, ["a2a:call"]),
    ],
)
async def test_scopes_from_scope_or_scp(
    servers: dict[str, str], granted: dict[str, object], scopes: list[str]
) -> None:
    resp = await whoami(servers["HS"], bearer(hs_token("carol", **granted)))
    assert resp.json()["scope"]["attrs"] == {**STAMP, "scopes": scopes}


@module_loop
@pytest.mark.parametrize("case", list(ATTACKS))
async def test_attack_table_is_rejected_without_leaks(
    servers: dict[str, str], case: str, caplog: pytest.LogCaptureFixture
) -> None:
    server, make_headers = ATTACKS[case]
    headers = make_headers()
    caplog.set_level(logging.DEBUG, logger="apcore_a2a.auth")
    resp = await whoami(servers[server], headers)
    assert resp.status_code == 401
    assert refusal_text(resp) == UNAUTHORIZED_BODY
    assert resp.headers["www-authenticate"] == "Bearer"
    token = headers.get("Authorization", "").partition(" ")[2]
    if token:
        # Neither the token nor any of its segments comes back, nor lands in the logs.
        for piece in [token, *[p for p in token.split(".") if len(p) > 8]]:
            assert piece not in resp.text
            assert all(piece not in v for v in resp.headers.values())
            assert piece not in caplog.text
    if case != "no header":  # the reason is logged (at INFO, never the token)
        assert any(r.levelno == logging.INFO for r in caplog.records)
    assert not any(r.levelno >= logging.WARNING for r in caplog.records)


async def test_token_with_aud_rejected_when_no_audience_configured() -> None:
    auth = JWTAuthenticator(HMAC_SECRET)
    async with serve_probe(auth) as base:
        assert (await whoami(base, bearer(hs_token("alice")))).status_code == 401
        no_aud = jwt.encode(
            {"sub": "alice", "exp": int(time.time()) + 60}, HMAC_SECRET, algorithm="HS256"
        )
        assert (await whoami(base, bearer(no_aud))).status_code == 200


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of key= or jwks_url="),
        ({"key": "k" * 40, "jwks_url": "http://127.0.0.1:1/jwks"}, "exactly one"),
        ({"key": ""}, "must not be empty"),
        ({"key": HMAC_SECRET, "algorithms": ["none"]}, "'none'"),
        ({"key": HMAC_SECRET, "algorithms": ["HS256", "RS256"]}, "RS256 cannot be used"),
        ({"key": RSA.public_pem, "algorithms": ["HS256"]}, "HS256 cannot be used"),
        ({"key": EC.public_pem, "algorithms": ["ES384"]}, "ES384 cannot be used"),
        ({"jwks_url": "http://127.0.0.1:1/jwks", "algorithms": ["HS256"]}, "JWKS URL"),
        ({"jwks_url": "file:///etc/passwd"}, "scheme"),
    ],
)
def test_unsafe_configurations_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JWTAuthenticator(**kwargs)  # type: ignore[arg-type]


async def test_private_key_pem_is_reduced_to_public_key() -> None:
    from cryptography.hazmat.primitives import serialization

    private_pem = RSA.private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    auth = JWTAuthenticator(private_pem)
    assert auth.algorithms == ["RS256"]
    token = RSA.sign({"sub": "x", "exp": int(time.time()) + 60})
    identity = await auth.authenticate({"Authorization": "Bearer " + token})
    assert identity is not None and identity.id == "x"


async def test_token_without_exp_is_refused_unless_allowed() -> None:
    forever = bearer(jwt.encode({"sub": "alice"}, HMAC_SECRET, algorithm="HS256"))
    strict = JWTAuthenticator(HMAC_SECRET)
    with pytest.raises(InvalidCredentials, match="exp"):
        await strict.authenticate(forever)
    lenient = JWTAuthenticator(HMAC_SECRET, require_exp=False)
    identity = await lenient.authenticate(forever)
    assert identity is not None and identity.id == "alice"
    # Allowing tokens without exp does not stop an exp that is there from being checked.
    expired = jwt.encode({"sub": "a", "exp": int(time.time()) - 60}, HMAC_SECRET)
    with pytest.raises(InvalidCredentials, match="ExpiredSignature"):
        await lenient.authenticate(bearer(expired))
