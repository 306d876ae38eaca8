"""The verification keys of a JWKS endpoint, fetched without ever blocking a request.

Not PyJWT's ``PyJWKClient``: its lookups run blocking ``urllib`` under one lock (on the
thread pool that also runs sync modules), an expired set is refetched while every lookup
waits, a failed fetch fails the known keys too, and it has no back-off, body limit or
memory of unknown ``kid``s, so a hanging or failing endpoint would take the agent down with
it. The policy here (one shared fetch, one deadline, back-off with jitter, known keys never
wait, unknown kids remembered) is in docs/auth.md ("How tokens are checked").

Example::

    keys = JWKSKeySource("https://idp.example.com/.well-known/jwks.json")
    key = await keys.get("2025-01", "PS256")   # a PyJWK, or KeyLookupError
    await keys.aclose()
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import ssl
import time
import urllib.request
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import jwt
from cachetools import TLRUCache

from apcore_a2a._addresses import CLASSES, host_class
from apcore_a2a._egress import CheckedAddresses, Resolver, system_lookup
from apcore_a2a._proxies import trusted_context
from apcore_a2a._text import hide_url_secrets
from apcore_a2a.auth.authenticator import InvalidCredentials

logger = logging.getLogger("apcore_a2a.auth")

#: A key set is a few kB; anything much larger is not one.
MAX_JWKS_BYTES = 512 * 1024
#: What a fetch asks for: JSON, uncompressed or gzip (which the fetch inflates itself).
_ASKED = {"Accept": "application/json", "Accept-Encoding": "gzip"}
#: Unknown kids remembered at most (a spray of random kids cannot grow memory).
MAX_UNKNOWN_KIDS = 4096


class KeyLookupError(InvalidCredentials):
    """No verification key for a ``kid`` (not in the set, or the endpoint is failing)."""


class PublishedKey:
    """One signature key of the set, as a ``PyJWK`` per algorithm.

    A JWK need not name its ``alg`` (RFC 7517 §4.4), and ``PyJWK`` then binds a default
    (RS256 for every RSA key), which PyJWT enforces against the token's ``alg``: a token
    in PS256 or RS384, though allowed by the configuration, would be refused. So a JWK
    without ``alg`` is bound to the algorithm asked for (the caller asks only for one it
    allows; one the key cannot do fails to build), and a JWK that names one keeps it.
    """

    def __init__(self, member: dict[str, Any]) -> None:
        self._member = member
        self.declared: str | None = (
            member.get("alg") if isinstance(member.get("alg"), str) else None
        )
        self.default = jwt.PyJWK(member)  # raises if the key is unusable
        self._by_alg = {self.default.algorithm_name: self.default}

    def for_alg(self, alg: str | None) -> jwt.PyJWK:
        """The key bound to *alg* (the declared or default one if *alg* is ``None``);
        raises ``PyJWTError`` or ``ValueError`` when this key cannot do *alg* (a JWK
        that names another)."""
        if alg is None:
            return self.default
        if self.declared is not None:
            if alg != self.declared:
                raise ValueError(f"the key is for {self.declared}")
            return self.default
        key = self._by_alg.get(alg)
        if key is None:
            # At most one entry per algorithm PyJWT knows: a short, fixed list.
            key = self._by_alg[alg] = jwt.PyJWK(self._member, algorithm=alg)
        return key


class JWKSKeySource:
    """Signing keys by ``kid`` from a JWKS URL. *transport* and *resolver* are for
    embedding and tests; by default each fetch opens its own connections, so the source is
    not tied to one event loop and holds no socket between fetches.

    Each request of a fetch goes to an address looked up once and checked
    (:class:`CheckedAddresses`): a redirect may not lead to a more private class of address
    than the configured URL's, and nothing resolves the name again to connect; a request the
    environment's proxy settings name a proxy for is sent through it (httpx's reading of
    them), with the same class check."""

    def __init__(
        self,
        url: str,
        *,
        cache_seconds: float = 300.0,
        refresh_cooldown: float = 30.0,
        timeout: float = 10.0,
        unknown_kid_seconds: float = 60.0,
        backoff_max: float = 60.0,
        transport: httpx.AsyncBaseTransport | None = None,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            parts = httpx.URL(url)
        except httpx.InvalidURL:
            raise ValueError(f"the JWKS URL is not a URL: {url!r}") from None
        if parts.scheme not in ("http", "https") or not parts.host:
            raise ValueError(f"the JWKS URL needs the http or https scheme and a host: {url!r}")
        if min(cache_seconds, refresh_cooldown, unknown_kid_seconds, backoff_max) < 0:
            raise ValueError("the jwks_* durations must be >= 0")
        if timeout <= 0:
            raise ValueError("jwks_timeout must be positive")
        self.url = url
        #: the URL as logged: no credential (a password, a user name alone), nor any value
        #: of its query (some IdPs take an API key there, under any name)
        self.shown: str = hide_url_secrets(url, every_query_value=True)
        if parts.scheme == "http" and CLASSES[host_class(parts.host)] != "loopback":
            logger.warning(
                "the JWKS URL %s is plain http: whoever answers for it on the way chooses the "
                "keys, and so the tokens this agent accepts; give an https URL",
                self.shown,
            )
        self.cache_seconds = cache_seconds
        self.refresh_cooldown = refresh_cooldown
        self.timeout = timeout
        self.unknown_kid_seconds = unknown_kid_seconds
        self.backoff_max = backoff_max
        self._transport = transport
        self._resolve = resolver or system_lookup
        self._verify: ssl.SSLContext | bool = (
            trusted_context() if parts.scheme == "https" and transport is None else True
        )
        self._clock = clock
        self._keys: dict[str, list[PublishedKey]] = {}  # a kid's keys, in the set's order
        self._fetched_at: float | None = None
        self._failures = 0
        self._retry_at = 0.0
        # SHA-256 of a kid -> when to forget it; a refused kid is remembered (bounded) for
        # a while, by digest: a made-up kid can be as long as the token (8 kB each).
        self._unknown: TLRUCache[bytes, float] = TLRUCache(
            maxsize=MAX_UNKNOWN_KIDS, ttu=lambda _kid, until, _now: until, timer=clock
        )
        self._inflight: asyncio.Task[None] | None = None
        #: Completed fetch attempts (successful or not), for operations and tests.
        self.fetches = 0

    async def get(self, kid: str, alg: str | None = None) -> jwt.PyJWK:
        """The key for *kid*, bound to *alg* unless its JWK names its own algorithm
        (:class:`PublishedKey`); raise :class:`KeyLookupError`."""
        for published in await self._published(kid):  # keys of several kty may share it
            with contextlib.suppress(jwt.PyJWTError, ValueError, TypeError):
                return published.for_alg(alg)
        raise KeyLookupError(f"the key cannot verify {alg}")

    async def _published(self, kid: str) -> list[PublishedKey]:
        now = self._clock()
        key = self._keys.get(kid)
        if key is not None:
            stale = self._fetched_at is None or now - self._fetched_at >= self.cache_seconds
            if stale and now >= self._retry_at:
                self._start_fetch()  # refresh in the background; this request does not wait
            return key
        if _digest(kid) in self._unknown:
            raise KeyLookupError("kid not in the key set (remembered)")
        if self._fetched_at is not None and now - self._fetched_at < self.refresh_cooldown:
            # The set was fetched moments ago: a refetch would only let a stream of made-up
            # kids turn into a stream of fetches.
            self._remember_unknown(kid, now)
            raise KeyLookupError("kid not in the key set (fetched recently)")
        if now < self._retry_at:
            raise KeyLookupError("JWKS endpoint failing; backing off")
        try:
            await asyncio.shield(self._start_fetch())
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this request itself is being canceled
            # The shared fetch was canceled (shutdown): a refusal, not a cancellation.
            raise KeyLookupError("JWKS fetch canceled") from None
        key = self._keys.get(kid)
        if key is not None:
            return key
        if self._failures:
            raise KeyLookupError("JWKS fetch failed")
        self._remember_unknown(kid, self._clock())
        raise KeyLookupError("kid not in the key set")

    def _remember_unknown(self, kid: str, now: float) -> None:
        if self.unknown_kid_seconds > 0:
            self._unknown[_digest(kid)] = now + self.unknown_kid_seconds

    def _start_fetch(self) -> asyncio.Task[None]:
        task = self._inflight
        loop = asyncio.get_running_loop()
        if task is None or task.done() or task.get_loop() is not loop:
            task = loop.create_task(self._fetch(), name="apcore-a2a-jwks-fetch")
            self._inflight = task
        return task

    async def _fetch(self) -> None:
        try:
            async with asyncio.timeout(self.timeout):
                keys = await self._download()
        except Exception as exc:  # any failure of a hostile or broken endpoint
            self._failures += 1
            # 1, 2, 4 ... s; the jitter keeps replicas from retrying in step.
            delay = min(self.backoff_max, 2.0 ** min(self._failures - 1, 30))
            delay *= random.uniform(0.8, 1.0)  # noqa: S311 -- jitter, not a secret
            self._retry_at = self._clock() + delay
            reason = (
                "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            )
            logger.log(
                logging.WARNING if self._failures == 1 else logging.DEBUG,
                "JWKS fetch from %s failed (%s); %s; next attempt in %.1f s at the earliest",
                self.shown,
                reason[:200],
                "keeping the last key set" if self._keys else "no keys yet",
                delay,
            )
        else:
            if self._failures:
                logger.warning("JWKS from %s reachable again", self.shown)
            self._keys, self._fetched_at = keys, self._clock()
            self._failures, self._retry_at = 0, 0.0
            for digest in [d for d in map(_digest, keys) if d in self._unknown]:
                del self._unknown[digest]
        finally:
            self.fetches += 1

    async def _download(self) -> dict[str, list[PublishedKey]]:
        # HTTP(S)_PROXY, ALL_PROXY and NO_PROXY as httpx reads them (trust_env), read at each
        # fetch as httpx did; applied by CheckedAddresses, after its check, not by httpx.
        proxies = urllib.request.getproxies()
        async with (
            httpx.AsyncClient(
                transport=CheckedAddresses(self._resolve, proxies, self._verify, self._transport),
                follow_redirects=True,
                max_redirects=3,
                timeout=self.timeout,
                trust_env=False,  # httpx's own proxies would skip the check
                event_hooks={"request": [self._no_downgrade]},
            ) as http,
            http.stream("GET", self.url, headers=_ASKED) as response,
        ):
            if response.status_code != 200:
                raise ValueError(f"HTTP {response.status_code}")
            coding = (response.headers.get("content-encoding") or "identity").strip().lower()
            if response.is_stream_consumed:  # made in this process: read and inflated
                coding = "identity"
            if coding not in ("identity", "gzip", "x-gzip"):
                raise ValueError(f"content encoding {coding[:20]!r} was not asked for")
            # Inflated here, never past the limit: httpx inflates each chunk whole (64 kB
            # of gzip, 64 MB of "key set" in memory before its size was seen).
            inflate = zlib.decompressobj(zlib.MAX_WBITS | 16) if coding != "identity" else None
            body, read = bytearray(), 0
            async for chunk in _as_sent(response):
                read += len(chunk)  # empty deflate blocks inflate to nothing, for ever
                if read > MAX_JWKS_BYTES:
                    sent = "compressed key set" if inflate is not None else "key set"
                    raise ValueError(f"{sent} larger than {MAX_JWKS_BYTES} bytes")
                room = MAX_JWKS_BYTES + 1 - len(body)
                body += inflate.decompress(chunk, room) if inflate is not None else chunk
                if len(body) > MAX_JWKS_BYTES:
                    raise ValueError(f"key set larger than {MAX_JWKS_BYTES} bytes")
                if inflate is not None and inflate.unused_data:  # kept whole by zlib
                    raise ValueError("more data after the gzip stream's end")
            if inflate is not None and not inflate.eof:
                raise ValueError("the gzip stream is cut short")
        return parse_jwks(bytes(body))

    async def _no_downgrade(self, request: httpx.Request) -> None:
        # Redirects are followed (identity providers move their key sets), but a key set
        # asked for over https is never read from plain http, where anyone on the path
        # could write the keys whose tokens the agent then accepts.
        if request.url.scheme != "https" and httpx.URL(self.url).scheme == "https":
            raise ValueError(f"refused a redirect from https to {request.url.scheme}")

    async def aclose(self) -> None:
        """Cancel a fetch in flight (waiting requests are refused); the source stays usable."""
        task, self._inflight = self._inflight, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await task


async def _as_sent(response: httpx.Response) -> AsyncIterator[bytes]:
    """*response*'s body as sent; one a transport made in this process
    (``httpx.Response(content=...)``: a test's, an embedder's) was read when made."""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def _digest(kid: str) -> bytes:
    return hashlib.sha256(kid.encode("utf-8", "surrogatepass")).digest()


def parse_jwks(body: bytes) -> dict[str, list[PublishedKey]]:
    """The signature keys of a JWKS document by ``kid``, in its order (keys of different
    ``kty`` may share one, RFC 7517 §4.5); ``ValueError`` if it has none.
    Symmetric and private keys (``d``) are skipped too: a public key set has no business
    publishing a secret, and PyJWT cannot verify with a private RSA key."""
    try:
        document: Any = json.loads(body)
    except ValueError:  # UnicodeDecodeError is one too
        raise ValueError("not JSON") from None
    members = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(members, list):
        raise ValueError("no 'keys' array")
    keys: dict[str, list[PublishedKey]] = {}
    for member in members:
        if not isinstance(member, dict) or member.get("kty") == "oct" or "d" in member:
            continue
        kid = member.get("kid")
        if isinstance(kid, str) and kid and member.get("use", "sig") == "sig":
            # Whatever PyJWT raises for one member ("alg": "none" is NotImplementedError),
            # the others stay usable.
            with contextlib.suppress(Exception):
                keys.setdefault(kid, []).append(PublishedKey(member))
    if not keys:
        raise ValueError("no usable signature keys")
    return keys
