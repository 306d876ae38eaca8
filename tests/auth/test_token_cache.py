"""The verified-token cache never extends a token's life and never shares mutable state."""

from __future__ import annotations

import asyncio
import time

import jwt
import pytest

from apcore_a2a.auth import InvalidCredentials, JWTAuthenticator

from .keys import HMAC_SECRET


def header(**claims: object) -> dict[str, str]:
    claims.setdefault("exp", int(time.time()) + 600)
    return {"Authorization": "Bearer " + jwt.encode(claims, HMAC_SECRET)}


async def test_cached_token_still_expires_at_exp() -> None:
    auth = JWTAuthenticator(HMAC_SECRET, verified_cache_seconds=3600)
    exp = int(time.time()) + 1
    headers = header(sub="alice", exp=exp)
    assert (await auth.authenticate(headers)).id == "alice"  # type: ignore[union-attr]
    assert (await auth.authenticate(headers)).id == "alice"  # type: ignore[union-attr]
    await asyncio.sleep(max(0.0, exp - time.time()) + 0.05)
    with pytest.raises(InvalidCredentials, match="ExpiredSignature"):
        await auth.authenticate(headers)


async def test_cache_returns_copies() -> None:
    auth = JWTAuthenticator(HMAC_SECRET, verified_cache_size=2)
    headers = header(sub="alice", roles=["admin"])
    first = await auth.authenticate(headers)
    assert first is not None
    first.attrs["tampered"] = True
    second = await auth.authenticate(headers)
    assert second is not None and second is not first
    assert second.attrs == {"auth_scheme": "jwt"}
    for name in ("bob", "carol", "dave", "alice"):
        assert (await auth.authenticate(header(sub=name))).id == name  # type: ignore[union-attr]


async def test_bad_tokens_are_rejected_every_time() -> None:
    cached = JWTAuthenticator(HMAC_SECRET)
    bad = {"Authorization": "Bearer " + jwt.encode({"sub": "m"}, "x" * 40)}
    for _ in range(2):
        with pytest.raises(InvalidCredentials):
            await cached.authenticate(bad)
