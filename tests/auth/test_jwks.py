"""JWKS: keys fetched from a local HTTP server by kid, cached, rotated without restart."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from apcore_a2a.auth import JWTAuthenticator
from tests._support import running_server

from .attacks import refusal_text
from .keys import AUDIENCE, ISSUER, JWKSServer, bearer, claims, ec_pair, rsa_pair
from .probe import serve_probe


async def whoami(client: httpx.AsyncClient, base: str, token: str) -> httpx.Response:
    return await client.get(base + "/whoami", headers=bearer(token))


def sub(name: str) -> dict[str, Any]:
    """Claims for an authenticator without issuer/audience checks: ``sub`` and ``exp``."""
    return {"sub": name, "exp": int(time.time()) + 300}


async def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_rotation_unknown_kid_and_caching() -> None:
    old, new = rsa_pair("2024-old"), ec_pair("2025-new")
    jwks = JWKSServer(keys=[old])
    async with running_server(jwks.app()) as idp:
        auth = JWTAuthenticator(
            jwks_url=idp + "/.well-known/jwks.json",
            issuer=ISSUER,
            audience=AUDIENCE,
            jwks_refresh_cooldown=0,
        )
        async with serve_probe(auth) as base, httpx.AsyncClient() as client:
            # Cold cache: concurrent first requests share one fetch.
            first = await asyncio.gather(
                *(whoami(client, base, old.sign(claims(f"u{i}"))) for i in range(5))
            )
            assert [r.status_code for r in first] == [200] * 5
            assert jwks.fetches == 1
            assert (await whoami(client, base, old.sign(claims("alice")))).json()["var"] == "alice"
            assert jwks.fetches == 1, "a known kid is served from the cache"

            # A kid nobody published: rejected after one refetch.
            stranger = rsa_pair("who-knows")
            resp = await whoami(client, base, stranger.sign(claims("mallory")))
            assert resp.status_code == 401
            assert jwks.fetches == 2

            # A token whose kid names a published key but is signed by another key.
            forged = rsa_pair(old.kid)
            assert (await whoami(client, base, forged.sign(claims("mallory")))).status_code == 401

            # The IdP publishes a new key: accepted without restarting anything.
            jwks.keys = [old, new]
            resp = await whoami(client, base, new.sign(claims("bob")))
            assert resp.status_code == 200
            assert resp.json()["var"] == "bob"
            assert jwks.fetches == 3
            assert (await whoami(client, base, old.sign(claims("alice")))).status_code == 200


async def test_retired_key_stops_working_once_a_refresh_drops_it() -> None:
    old, new = rsa_pair("old"), rsa_pair("new")
    jwks = JWKSServer(keys=[old, new])
    async with running_server(jwks.app()) as idp:
        # Both caches (key set and verified tokens) bound how long a retired key works.
        auth = JWTAuthenticator(
            jwks_url=idp + "/.well-known/jwks.json",
            jwks_cache_seconds=0.3,
            verified_cache_seconds=0.3,
        )
        async with serve_probe(auth) as base, httpx.AsyncClient() as client:
            assert (await whoami(client, base, old.sign(sub("a")))).status_code == 200
            jwks.keys = [new]
            await asyncio.sleep(0.35)
            # A known kid never waits for the refresh the stale set triggers; once that
            # refresh has landed, the retired key is refused.
            await whoami(client, base, old.sign(sub("a")))
            await wait_for(lambda: jwks.fetches == 2)
            assert (await whoami(client, base, old.sign(sub("a2")))).status_code == 401
            assert (await whoami(client, base, new.sign(sub("b")))).status_code == 200


async def test_refresh_cooldown_limits_refetches_for_unknown_kids() -> None:
    key = rsa_pair("k1")
    jwks = JWKSServer(keys=[key])
    async with running_server(jwks.app()) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json", jwks_refresh_cooldown=60)
        async with serve_probe(auth) as base, httpx.AsyncClient() as client:
            assert (await whoami(client, base, key.sign(sub("a")))).status_code == 200
            for i in range(10):
                spray = ec_pair(f"spray-{i}").sign(sub("x"))
                assert (await whoami(client, base, spray)).status_code == 401
            assert jwks.fetches == 1


async def test_token_without_kid_is_rejected_without_fetching() -> None:
    key = rsa_pair("k1")
    jwks = JWKSServer(keys=[key])
    async with running_server(jwks.app()) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json")
        async with serve_probe(auth) as base, httpx.AsyncClient() as client:
            import jwt as pyjwt

            token = pyjwt.encode(sub("a"), key.private, algorithm="RS256")
            assert (await whoami(client, base, token)).status_code == 401
            assert jwks.fetches == 0


@pytest.mark.parametrize("failure", ["unreachable", "not json"])
async def test_jwks_failure_is_401_and_a_warning(
    failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = rsa_pair("k1")
    jwks = JWKSServer(keys=[key], broken=failure == "not json")
    async with running_server(jwks.app()) as idp:
        url = idp + "/.well-known/jwks.json"
        if failure == "unreachable":
            url = idp + "/nothing-here"
        auth = JWTAuthenticator(jwks_url=url, jwks_timeout=2)
        caplog.set_level(logging.WARNING, logger="apcore_a2a.auth")
        async with serve_probe(auth) as base, httpx.AsyncClient() as client:
            token = key.sign(sub("a"))
            resp = await whoami(client, base, token)
            assert resp.status_code == 401
            assert refusal_text(resp) == "Missing or invalid Bearer token"
    assert "JWKS" in caplog.text
    assert token not in caplog.text
