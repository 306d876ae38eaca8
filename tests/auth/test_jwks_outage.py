"""A JWKS endpoint that hangs, fails or lies cannot take the agent down (issue 17).

Each test talks to a real endpoint on 127.0.0.1: a raw TCP server that never answers
(:mod:`.hanging`) or a Starlette app whose answers the test switches.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from apcore_a2a.auth import InvalidCredentials, JWTAuthenticator
from tests._support import running_server

from .hanging import hanging_endpoint
from .keys import KeyPair, ec_pair, rsa_pair


def headers(pair: KeyPair, sub: str = "alice") -> dict[str, str]:
    token = pair.sign({"sub": sub, "exp": int(time.time()) + 300})
    return {"authorization": f"Bearer {token}"}


async def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


class SwitchableJWKS:
    """A JWKS endpoint that serves keys, an error, a body of the test's choosing, or hangs."""

    def __init__(self, keys: list[KeyPair]) -> None:
        self.keys = keys
        self.mode = "ok"
        self.body: bytes = b""
        self.requests = 0
        self.waiting = 0
        self.release = asyncio.Event()

    def app(self) -> Starlette:
        async def jwks(request: Request) -> Response:
            self.requests += 1
            if self.mode == "hang":
                self.waiting += 1
                try:
                    await self.release.wait()
                finally:
                    self.waiting -= 1
            if self.mode == "error":
                return Response("down", status_code=503)
            if self.mode == "body":
                return Response(self.body, media_type="application/json")
            return JSONResponse({"keys": [k.jwk() for k in self.keys]})

        return Starlette(routes=[Route("/.well-known/jwks.json", jwks)])


async def test_key_fetch_never_takes_a_thread_from_the_module_pool() -> None:
    # apcore runs sync modules on the loop's default executor. Fill it completely: a JWKS
    # fetch that needed a thread (as PyJWKClient does) would wait here forever.
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    busy, stop = threading.Event(), threading.Event()
    loop.set_default_executor(pool)
    blocked = loop.run_in_executor(None, lambda: (busy.set(), stop.wait(30)))
    try:
        async with running_server(endpoint.app()) as idp:
            assert busy.wait(5)
            auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json", jwks_timeout=20)
            identity = await asyncio.wait_for(auth.authenticate(headers(key)), 15)
            assert identity is not None and identity.id == "alice"
            assert endpoint.requests == 1
    finally:
        stop.set()
        await blocked
        pool.shutdown()


async def test_forty_random_kids_against_a_hanging_endpoint_cost_one_fetch() -> None:
    async with hanging_endpoint() as hang:
        auth = JWTAuthenticator(jwks_url=hang.url, jwks_timeout=1.0, jwks_backoff_max=60)
        tokens = [headers(ec_pair(secrets.token_hex(8)), f"u{i}") for i in range(40)]
        results = await asyncio.gather(
            *(auth.authenticate(t) for t in tokens), return_exceptions=True
        )
        assert all(isinstance(r, InvalidCredentials) for r in results), results
        assert hang.connections == 1, "one fetch in flight, awaited by all 40"
        # Backing off: the next unknown kid is refused without another connection.
        with pytest.raises(InvalidCredentials, match="backing off"):
            await auth.authenticate(headers(ec_pair("one-more")))
        assert hang.connections == 1
        assert auth.jwks is not None and auth.jwks.fetches == 1


async def test_known_keys_work_while_the_refresh_hangs() -> None:
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    async with running_server(endpoint.app()) as idp:
        # cache_seconds=0: the set is stale at once, so every lookup wants a refresh.
        auth = JWTAuthenticator(
            jwks_url=idp + "/.well-known/jwks.json",
            jwks_cache_seconds=0,
            jwks_timeout=60,
            verified_cache_size=0,
        )
        assert await auth.authenticate(headers(key, "warm")) is not None
        endpoint.mode = "hang"
        first = await auth.authenticate(headers(key, "first"))
        assert first is not None and first.id == "first"
        await wait_for(lambda: endpoint.waiting == 1)
        # The refresh hangs; requests with the known kid do not wait for it.
        many = await asyncio.gather(*(auth.authenticate(headers(key, f"u{i}")) for i in range(20)))
        assert [i.id for i in many if i is not None] == [f"u{i}" for i in range(20)]
        assert endpoint.waiting == 1, "still a single refresh in flight"
        await auth.aclose()
        endpoint.release.set()


async def test_failed_fetch_backs_off_then_recovers() -> None:
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    endpoint.mode = "error"
    async with running_server(endpoint.app()) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json", jwks_backoff_max=0.3)
        with pytest.raises(InvalidCredentials, match="fetch failed"):
            await auth.authenticate(headers(key))
        for _ in range(5):
            with pytest.raises(InvalidCredentials, match="backing off"):
                await auth.authenticate(headers(key))
        assert endpoint.requests == 1
        endpoint.mode = "ok"
        deadline = time.monotonic() + 10
        while True:
            try:
                identity = await auth.authenticate(headers(key))
                break
            except InvalidCredentials:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
        assert identity is not None and identity.id == "alice"
        assert endpoint.requests == 2, "one retry once the back-off had passed"


async def test_unknown_kids_are_remembered() -> None:
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    async with running_server(endpoint.app()) as idp:
        auth = JWTAuthenticator(
            jwks_url=idp + "/.well-known/jwks.json",
            jwks_refresh_cooldown=0,
            jwks_unknown_kid_seconds=60,
        )
        assert await auth.authenticate(headers(key)) is not None
        ghost = rsa_pair("ghost")
        with pytest.raises(InvalidCredentials, match="not in the key set"):
            await auth.authenticate(headers(ghost))
        assert endpoint.requests == 2
        for _ in range(5):
            with pytest.raises(InvalidCredentials, match="remembered"):
                await auth.authenticate(headers(ghost))
        assert endpoint.requests == 2
        # Published later: a new kid is looked up (the cooldown is 0 here).
        fresh = rsa_pair("fresh")
        endpoint.keys = [key, fresh]
        assert await auth.authenticate(headers(fresh)) is not None
        assert endpoint.requests == 3


def _jwk(pair: KeyPair, **extra: Any) -> dict[str, Any]:
    return {**pair.jwk(), **extra}


HOSTILE_BODIES: dict[str, Callable[[KeyPair], bytes]] = {
    "html": lambda k: b"<html>login</html>",
    "not an object": lambda k: b"[1, 2, 3]",
    "keys not a list": lambda k: b'{"keys": {"a": 1}}',
    "symmetric key": lambda k: (
        b'{"keys": [{"kty": "oct", "kid": "k1", "k": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}'
    ),
    "encryption key only": lambda k: JSONResponse({"keys": [_jwk(k, use="enc")]}).body,
    "key without kid": lambda k: (
        JSONResponse({"keys": [{n: v for n, v in k.jwk().items() if n != "kid"}]}).body
    ),
    "over 512 KiB": lambda k: JSONResponse({"keys": [k.jwk()], "padding": "x" * (600 * 1024)}).body,
}


@pytest.mark.parametrize("case", list(HOSTILE_BODIES))
async def test_hostile_key_sets_are_refused_with_a_warning(
    case: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    endpoint.mode = "body"
    endpoint.body = bytes(HOSTILE_BODIES[case](key))
    caplog.set_level(logging.WARNING, logger="apcore_a2a.auth")
    async with running_server(endpoint.app()) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json")
        with pytest.raises(InvalidCredentials):
            await auth.authenticate(headers(key))
    assert "JWKS fetch from" in caplog.text
    assert "Traceback" not in caplog.text


async def test_aclose_ends_a_hanging_fetch_and_its_waiters_get_a_refusal() -> None:
    async with hanging_endpoint() as hang:
        auth = JWTAuthenticator(jwks_url=hang.url, jwks_timeout=60)
        waiters = [
            asyncio.create_task(auth.authenticate(headers(rsa_pair(f"k{i}")))) for i in range(5)
        ]
        await hang.wait_open(1)
        await auth.aclose()
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(r, InvalidCredentials) for r in results), results
        await wait_for(lambda: hang.open == 0)


async def test_a_canceled_request_does_not_abort_the_shared_fetch() -> None:
    key = rsa_pair("k1")
    endpoint = SwitchableJWKS([key])
    endpoint.mode = "hang"
    async with running_server(endpoint.app()) as idp:
        auth = JWTAuthenticator(jwks_url=idp + "/.well-known/jwks.json", jwks_timeout=30)
        impatient = asyncio.create_task(auth.authenticate(headers(key, "impatient")))
        patient = asyncio.create_task(auth.authenticate(headers(key, "patient")))
        await wait_for(lambda: endpoint.waiting == 1)
        impatient.cancel()
        with pytest.raises(asyncio.CancelledError):
            await impatient
        endpoint.mode = "ok"
        endpoint.release.set()
        identity = await patient
        assert identity is not None and identity.id == "patient"
        assert endpoint.requests == 1
