"""Hostile JWTs against an agent that requires bearer auth, over real HTTP.

Reference: PyJWT itself, with the agent's key, algorithm, audience and issuer. A token
PyJWT rejects must get ``401`` (with ``WWW-Authenticate``); one it accepts may pass.
Never a 5xx, never the key in a body.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests._support import TLS

from . import _report
from ._oracle import Oracle
from ._serve import agent_process
from ._strategies import header_bytes, hostile_text, json_values, profile

KEY = "reliability-" + secrets.token_urlsafe(32)
ISSUER = "https://idp.reliability.test/"
AUDIENCE = "apcore-a2a-reliability"
TALLY = _report.tally("hostile: JWT")
ORACLE = Oracle(TALLY, secrets=[KEY], codes=[-32093])  # UnauthenticatedError
BODY = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "no-such-task"}}


@pytest.fixture(scope="module")
def auth_agent() -> Iterator[httpx.Client]:
    with (
        agent_process(
            auth_key=KEY, auth_issuer=ISSUER, auth_audience=AUDIENCE, auth_algorithms=["HS256"]
        ) as served,
        httpx.Client(base_url=served.url, timeout=30, verify=TLS) as http,
    ):
        yield http
        assert served.proc.poll() is None
        assert http.get("/health").status_code == 200
        ok = http.post(
            "/", json=BODY, headers={"A2A-Version": "1.0", "Authorization": f"Bearer {_good()}"}
        )
        assert ok.status_code == 200 and ok.json()["error"]["code"] == -32001


def _good(**claims: Any) -> str:
    now = int(time.time())
    payload = {
        "sub": "alice",
        "iss": ISSUER,
        "aud": AUDIENCE,
        "iat": now,
        "exp": now + 600,
        **claims,
    }
    return jwt.encode(payload, KEY, algorithm="HS256")


def _b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _reference_accepts(token: str) -> bool:
    try:
        claims = jwt.decode(
            token,
            KEY,
            algorithms=["HS256"],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["sub", "exp"]},
        )
    except (jwt.InvalidTokenError, ValueError, TypeError):
        return False
    return isinstance(claims.get("sub"), str) and bool(claims["sub"])


def _call(http: httpx.Client, authorization: Any, token: str | None = None) -> None:
    headers: dict[str, Any] = {"A2A-Version": "1.0"}
    if authorization is not None:
        headers["Authorization"] = authorization
    response = http.post("/", json=BODY, headers=headers)
    ORACLE.check(response)
    if token is None or not _reference_accepts(token):
        assert response.status_code == 401, (token, response.text)
        assert response.headers.get("www-authenticate", "").lower().startswith("bearer")


claim_values = st.one_of(
    json_values,
    st.integers(),
    st.sampled_from([None, "", "alice", ISSUER, AUDIENCE, [AUDIENCE], -1, 2**63, 1e308]),
)


@profile(120)
@given(
    claims=st.dictionaries(
        st.sampled_from(["sub", "exp", "nbf", "iat", "aud", "iss", "roles", "scope", "tenant"]),
        claim_values,
        max_size=6,
    ),
    header=st.dictionaries(
        st.sampled_from(["alg", "kid", "typ", "jku", "x5u", "crit", "b64", "jwk"]),
        st.one_of(
            json_values,
            st.sampled_from(
                ["none", "HS256", "RS256", "HS512", "../../etc/passwd", "https://127.0.0.1/jwks"]
            ),
        ),
        max_size=4,
    ),
    signing=st.sampled_from(["right-key", "wrong-key", "none", "garbage", "empty"]),
)
def test_forged_and_malformed_tokens(
    auth_agent: httpx.Client, claims: dict[str, Any], header: dict[str, Any], signing: str
) -> None:
    now = int(time.time())
    body = {"sub": "mallory", "iss": ISSUER, "aud": AUDIENCE, "exp": now + 600, **claims}
    if signing == "right-key":
        try:
            token = jwt.encode(
                body,
                KEY,
                algorithm="HS256",
                headers={k: v for k, v in header.items() if k != "alg"},
            )
        except (TypeError, ValueError, OverflowError, jwt.PyJWTError):
            return  # PyJWT cannot even encode it
    else:
        head = {"alg": "HS256", "typ": "JWT", **header}
        signature = {
            "wrong-key": lambda: _b64(secrets.token_bytes(32)),
            "none": lambda: "",
            "garbage": lambda: "!!not-base64!!",
            "empty": lambda: "",
        }[signing]()
        try:
            token = f"{_b64(head)}.{_b64(body)}.{signature}"
        except (TypeError, ValueError, OverflowError):
            return
    # Past ~64 KiB of headers uvicorn refuses the request itself (400, connection closed).
    assume(len(token) < 32_000)
    _call(auth_agent, f"Bearer {token}", token)


@profile(120)
@given(
    value=st.one_of(
        header_bytes, hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")[:9000])
    )
)
def test_arbitrary_authorization_headers(auth_agent: httpx.Client, value: bytes) -> None:
    value = bytes(c for c in value if c == 9 or (c >= 32 and c != 127)).strip()
    for candidate in (value, b"Bearer " + value, b"bearer  " + value, b"Basic " + value):
        _call(auth_agent, candidate.strip() or None)


def test_expired_wrong_audience_and_oversized_tokens_are_refused(auth_agent: httpx.Client) -> None:
    for token in (
        _good(exp=int(time.time()) - 5),
        _good(aud="someone-else"),
        _good(iss="https://evil.test/"),
        _good(nbf=int(time.time()) + 3600),
        _good(pad="x" * 20_000),
        jwt.encode(
            {"sub": "alice", "exp": int(time.time()) + 60}, "not-the-key", algorithm="HS256"
        ),
    ):
        _call(auth_agent, f"Bearer {token}", token)
    _call(auth_agent, None)


def test_valid_token_passes(auth_agent: httpx.Client) -> None:
    token = _good()
    response = auth_agent.post(
        "/", json=BODY, headers={"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
    )
    ORACLE.check(response)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32001
