"""JWKS: keys fetched from a local HTTP server by kid, cached, rotated without restart."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from apcore_a2a.auth import JWTAuthenticator
from tests._support import TLS, running_server

from .attacks import refusal_text
from .keys import AUDIENCE, ISSUER, JWKSServer, KeyPair, bearer, claims, ec_pair, rsa_pair
from .probe import serve_probe


async def whoami(client: httpx.AsyncClient, base: str, token: str) -> httpx.Response:
    return await client.get(base + "/whoami", headers=bearer(token))


async def names(_host: str, _port: int) -> list[str]:
    """Every name's address, for a MockTransport standing where requests leave the machine
    (an address of the documentation range: nothing is sent)."""
    return ["192.0.2.7"]


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
        async with serve_probe(auth) as base, httpx.AsyncClient(verify=TLS) as client:
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
        async with serve_probe(auth) as base, httpx.AsyncClient(verify=TLS) as client:
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
        async with serve_probe(auth) as base, httpx.AsyncClient(verify=TLS) as client:
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
        async with serve_probe(auth) as base, httpx.AsyncClient(verify=TLS) as client:
            import jwt as pyjwt

            token = pyjwt.encode(sub("a"), key.private, algorithm="RS256")
            assert (await whoami(client, base, token)).status_code == 401
            assert jwks.fetches == 0


def hmac_forgery(key: KeyPair, payload: dict[str, Any]) -> str:
    """An HS256 token "signed" with *key*'s public PEM as the HMAC secret (PyJWT will not
    make one), the classic algorithm confusion."""

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = {"alg": "HS256", "typ": "JWT", "kid": key.kid}
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(payload).encode())}"
    mac = hmac.new(key.public_pem.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(mac)}"


async def test_the_configured_algorithms_decide_not_pyjwks_default() -> None:
    # A JWK need not name its algorithm (RFC 7517 §4.4; several IdPs omit it). PyJWK then
    # binds RS256 to every RSA key, so an agent configured for PS256 refused every token.
    bare = dataclasses.replace(rsa_pair("bare"), declares_alg=False)
    named = rsa_pair("named")  # its JWK says RS256
    jwks = JWKSServer(keys=[bare, named])
    async with running_server(jwks.app()) as idp:
        url = idp + "/.well-known/jwks.json"
        wide = JWTAuthenticator(jwks_url=url, algorithms=["PS256", "RS384", "RS256"])
        narrow = JWTAuthenticator(jwks_url=url, algorithms=["PS256"])
        async with (
            serve_probe(wide) as wide_base,
            serve_probe(narrow) as narrow_base,
            httpx.AsyncClient(verify=TLS) as client,
        ):
            for alg in ("PS256", "RS384", "RS256"):
                resp = await whoami(client, wide_base, bare.sign(sub(alg), alg=alg))
                assert resp.status_code == 200, (alg, resp.text)
                assert resp.json()["var"] == alg
            # A JWK that names its algorithm is used with that one only.
            assert (await whoami(client, wide_base, named.sign(sub("n")))).status_code == 200
            refused = await whoami(client, wide_base, named.sign(sub("n"), alg="PS256"))
            assert refused.status_code == 401
            # Whatever the key, only the configured algorithms pass.
            assert (
                await whoami(client, narrow_base, bare.sign(sub("p"), alg="PS256"))
            ).status_code == 200
            for token in (
                bare.sign(sub("r"), alg="RS256"),
                named.sign(sub("r")),
                hmac_forgery(bare, sub("mallory")),
                hmac_forgery(named, sub("mallory")),
            ):
                assert (await whoami(client, narrow_base, token)).status_code == 401
            for key in (bare, named):
                assert (
                    await whoami(client, wide_base, hmac_forgery(key, sub("m")))
                ).status_code == 401


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
        async with serve_probe(auth) as base, httpx.AsyncClient(verify=TLS) as client:
            token = key.sign(sub("a"))
            resp = await whoami(client, base, token)
            assert resp.status_code == 401
            assert refusal_text(resp) == "Missing or invalid Bearer token"
    assert "JWKS" in caplog.text
    assert token not in caplog.text


async def test_made_up_kids_remembered_cost_little_memory_whatever_their_length() -> None:
    # A kid is the client's to choose, as long as the token allows (8 kB): the unknown
    # ones are remembered (at most MAX_UNKNOWN_KIDS), and each must cost little, not its
    # length.
    import tracemalloc

    from apcore_a2a.auth.jwks import MAX_UNKNOWN_KIDS, JWKSKeySource, KeyLookupError

    body = json.dumps({"keys": [rsa_pair("real").jwk()]}).encode()
    transport = httpx.MockTransport(lambda _request: httpx.Response(200, content=body))
    source = JWKSKeySource("https://idp.example/jwks.json", transport=transport, resolver=names)
    with pytest.raises(KeyLookupError):
        await source.get("first", "RS256")  # fetches the set once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(MAX_UNKNOWN_KIDS):  # each kid a string of its own, as parsed
            with pytest.raises(KeyLookupError):
                await source.get(f"{i:06d}" + "k" * 6000, "RS256")
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert source.fetches == 1
    with pytest.raises(KeyLookupError, match="remembered"):
        await source.get(f"{0:06d}" + "k" * 6000, "RS256")
    assert grown < 500 * MAX_UNKNOWN_KIDS, grown  # not the 6 kB of each kid


async def test_a_password_in_the_jwks_url_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    failing = httpx.MockTransport(lambda _request: httpx.Response(500))
    url = "https://svc:s3cret-pw@idp.example/jwks.json"
    source = JWKSKeySource(url, transport=failing, resolver=names)
    with caplog.at_level(logging.DEBUG, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert "JWKS fetch from https://svc:***@idp.example/jwks.json failed" in caplog.text
    assert "s3cret-pw" not in caplog.text


async def test_a_user_name_alone_in_the_jwks_url_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # https://TOKEN@host is a common way to pass a token: without a password, the user
    # name is the credential. It was logged as given.
    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    failing = httpx.MockTransport(lambda _request: httpx.Response(500))
    url = "https://t0ken-4242@idp.example/jwks.json"
    source = JWKSKeySource(url, transport=failing, resolver=names)
    with caplog.at_level(logging.DEBUG, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert "JWKS fetch from https://***@idp.example/jwks.json failed" in caplog.text
    assert "4242" not in caplog.text


async def test_a_password_after_an_at_in_the_user_name_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # https://client@tenant:PASSWORD@host: httpx takes the user name to the last '@'.
    # The password was logged as given.
    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    failing = httpx.MockTransport(lambda _request: httpx.Response(500))
    url = "https://client@tenant:pw-4242@idp.example/jwks.json"
    source = JWKSKeySource(url, transport=failing, resolver=names)
    with caplog.at_level(logging.DEBUG, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert "JWKS fetch from https://***@tenant:***@idp.example/jwks.json failed" in caplog.text
    assert "4242" not in caplog.text


@pytest.mark.parametrize(
    ("url", "logged"),
    [
        ("https://idp.example/jwks.json?k3y-s3cret", "https://idp.example/jwks.json?***"),
        (
            "https://idp.example/jwks.json#access_token=k3y-s3cret",
            "https://idp.example/jwks.json#access_token=***",
        ),
        ("https://idp.example:8443/t@x/jwks.json", "https://idp.example:8443/t@x/jwks.json"),
    ],
    ids=["bare-query", "fragment", "at-in-path"],
)
async def test_the_jwks_url_is_logged_without_a_bare_or_fragment_token_and_unmangled(
    url: str, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A bare query item was logged as "?k3y-s3cret=***", a fragment as given, and an '@'
    # in the path taken for a user part's: "https://idp.example:***@x/jwks.json".
    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    failing = httpx.MockTransport(lambda _request: httpx.Response(500))
    source = JWKSKeySource(url, transport=failing, resolver=names)
    with caplog.at_level(logging.DEBUG, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert f"JWKS fetch from {logged} failed" in caplog.text
    assert "s3cret" not in caplog.text


async def test_a_key_in_the_jwks_urls_query_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    # Some IdPs take an API key in the key set URL's query: no value of it is logged.
    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    failing = httpx.MockTransport(lambda _request: httpx.Response(500))
    url = "https://idp.example/jwks.json?tenant=t1&api_key=k3y-s3cret"
    source = JWKSKeySource(url, transport=failing, resolver=names)
    with caplog.at_level(logging.DEBUG, logger="apcore_a2a"), pytest.raises(KeyLookupError):
        await source.get("real", "RS256")
    assert (
        "JWKS fetch from https://idp.example/jwks.json?tenant=***&api_key=*** failed" in caplog.text
    )
    assert "k3y-s3cret" not in caplog.text


async def test_a_compressed_key_set_is_inflated_no_further_than_the_size_limit() -> None:
    # httpx inflates each chunk it is given whole: 64 kB of gzip are 64 MB of key set, in
    # memory before the 512 kB limit saw one byte of it.
    import gzip
    import tracemalloc

    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    real = rsa_pair("real")
    bodies = {
        "/small": gzip.compress(json.dumps({"keys": [real.jwk()]}).encode()),
        "/bomb": gzip.compress(b" " * (64 << 20)),
    }

    async def answer(request: Request) -> Response:
        return Response(bodies[request.url.path], headers={"Content-Encoding": "gzip"})

    idp_app = Starlette(routes=[Route(path, answer) for path in bodies])
    async with running_server(idp_app) as idp:
        small = JWKSKeySource(idp + "/small")
        assert (await small.get("real", "RS256")).key_id == "real"  # gzip is read
        bomb = JWKSKeySource(idp + "/bomb")
        tracemalloc.start()
        try:
            with pytest.raises(KeyLookupError, match="fetch failed"):
                await bomb.get("real", "RS256")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 << 20, peak


async def test_a_gzip_key_set_is_read_whole_and_alone() -> None:
    # zlib's stream ends at its member's end and keeps what follows in unused_data: a small
    # key set followed by 64 MB of anything was held whole (and its keys taken), a second
    # member was dropped, and a stream cut before its checksum was read as complete.
    import gzip
    import tracemalloc

    from starlette.responses import StreamingResponse

    from apcore_a2a.auth.jwks import JWKSKeySource, KeyLookupError

    member = gzip.compress(json.dumps({"keys": [rsa_pair("real").jwk()]}).encode())
    other = gzip.compress(json.dumps({"keys": [rsa_pair("other").jwk()]}).encode())
    bodies: dict[str, Callable[[], Any]] = {
        "/trailing": lambda: iter([member, *([b"\0" * (1 << 20)] * 64)]),
        "/two": lambda: iter([member, other]),
        "/cut": lambda: iter([member[:-8]]),
    }

    async def answer(request: Request) -> Response:
        body = bodies[request.url.path]()
        return StreamingResponse(body, headers={"Content-Encoding": "gzip"})

    idp_app = Starlette(routes=[Route(path, answer) for path in bodies])
    async with running_server(idp_app) as idp:
        for path in bodies:
            source = JWKSKeySource(idp + path)
            tracemalloc.start()
            try:
                with pytest.raises(KeyLookupError, match="fetch failed"):
                    await source.get("real", "RS256")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak < 8 << 20, (path, peak)


async def test_a_gzip_stream_of_empty_blocks_is_read_no_further_than_the_size_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Empty stored deflate blocks inflate to nothing: a stream of them never reached the
    # key set's limit and was read for the whole jwks_timeout.
    from starlette.responses import StreamingResponse

    from apcore_a2a.auth.jwks import MAX_JWKS_BYTES, JWKSKeySource, KeyLookupError

    header = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 255])
    empty_blocks = b"\0\0\0\xff\xff" * (64 << 10)  # 320 kB, each block not the last

    async def answer(_request: Request) -> Response:
        async def body() -> Any:
            yield header
            for _ in range(200):  # 64 MB, then the server stops
                yield empty_blocks

        return StreamingResponse(body(), headers={"Content-Encoding": "gzip"})

    async with running_server(Starlette(routes=[Route("/keys", answer)])) as idp:
        source = JWKSKeySource(idp + "/keys", timeout=60.0)
        with pytest.raises(KeyLookupError, match="fetch failed"):
            await source.get("real", "RS256")
    assert f"compressed key set larger than {MAX_JWKS_BYTES} bytes" in caplog.text


def test_a_plain_http_jwks_url_is_warned_about_unless_on_loopback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Whoever answers for a plain-http key set chooses the keys, so the tokens accepted.
    for url, warned in [
        ("http://idp.example/jwks.json", True),
        ("http://10.0.0.7:8080/realms/a/certs", True),
        ("https://idp.example/jwks.json", False),
        ("http://127.0.0.1:8080/jwks.json", False),
        ("http://localhost/jwks.json", False),
    ]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="apcore_a2a.auth"):
            JWTAuthenticator(jwks_url=url)
        assert ("plain http" in caplog.text) is warned, url


async def test_an_uncompressed_key_set_over_the_limit_is_named_as_such(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Refused, but its refusal said "compressed key set larger than ...".
    from apcore_a2a.auth.jwks import MAX_JWKS_BYTES, JWKSKeySource, KeyLookupError

    async def answer(_request: Request) -> Response:
        return Response(b" " * (MAX_JWKS_BYTES + 1), media_type="application/json")

    async with running_server(Starlette(routes=[Route("/keys", answer)])) as idp:
        source = JWKSKeySource(idp + "/keys")
        with pytest.raises(KeyLookupError, match="fetch failed"):
            await source.get("real", "RS256")
    assert f"(ValueError: key set larger than {MAX_JWKS_BYTES} bytes)" in caplog.text
