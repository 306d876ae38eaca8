"""Arbitrary Authorization values and token headers: only a clean rejection, never a crash."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apcore_a2a.auth import InvalidCredentials, JWTAuthenticator

from .attacks import RSA
from .keys import HMAC_SECRET

AUTHENTICATORS = [JWTAuthenticator(HMAC_SECRET), JWTAuthenticator(RSA.public_pem)]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def b64(data: Any) -> str:
    raw = json.dumps(data).encode() if not isinstance(data, bytes) else data
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def outcome(auth: JWTAuthenticator, value: str) -> str:
    try:
        identity = asyncio.run(auth.authenticate({"authorization": value}))
    except InvalidCredentials:
        return "rejected"
    return "none" if identity is None else "accepted"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.text(max_size=300))
def test_arbitrary_authorization_values(value: str) -> None:
    for auth in AUTHENTICATORS:
        assert outcome(auth, value) == "rejected"
        assert outcome(auth, "Bearer " + value) == "rejected"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=st.dictionaries(
        st.sampled_from(["alg", "kid", "typ", "jku", "x5u", "crit", "b64"]), json_values
    ),
    payload=st.dictionaries(
        st.sampled_from(["sub", "exp", "nbf", "iat", "aud", "iss"]), json_values
    ),
    signature=st.binary(max_size=300),
)
def test_arbitrary_token_headers_and_claims(
    header: dict[str, Any], payload: dict[str, Any], signature: bytes
) -> None:
    token = f"{b64(header)}.{b64(payload)}.{b64(signature)}"
    for auth in AUTHENTICATORS:
        assert outcome(auth, "Bearer " + token) == "rejected"
