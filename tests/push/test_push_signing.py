"""Delivery JWTs: claims, verification with the published JWKS, key loading."""

from __future__ import annotations

import hashlib
import time

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from apcore_a2a.push import SigningKey

BODY = b'{"statusUpdate":{"taskId":"t-1"}}'


def _verify(key: SigningKey, token: str, audience: str) -> dict[str, object]:
    keyset = jwt.PyJWKSet.from_dict(key.jwks())
    header = jwt.get_unverified_header(token)
    public = next(k for k in keyset.keys if k.key_id == header["kid"])
    return jwt.decode(
        token,
        public,
        algorithms=[public.algorithm_name],
        audience=audience,
        issuer="https://agent.example",
    )


def test_generated_key_is_es256_and_token_carries_the_claims() -> None:
    key = SigningKey.generate()
    assert key.algorithm == "ES256"
    before = int(time.time())
    token = key.sign_delivery(
        issuer="https://agent.example",
        audience="https://hook.example/w",
        task_id="t-1",
        body=BODY,
        jti="d-1",
    )
    assert jwt.get_unverified_header(token) == {"alg": "ES256", "kid": key.kid, "typ": "JWT"}
    claims = _verify(key, token, "https://hook.example/w")
    assert claims["task_id"] == "t-1"
    assert claims["jti"] == "d-1"
    assert claims["body_sha256"] == hashlib.sha256(BODY).hexdigest()
    assert before <= int(claims["iat"]) <= int(time.time())  # type: ignore[call-overload]
    assert int(claims["exp"]) - int(claims["iat"]) == 300  # type: ignore[call-overload]


def test_jwks_has_only_public_material() -> None:
    jwks = SigningKey.generate().jwks()
    (jwk,) = jwks["keys"]
    assert jwk["kty"] == "EC"
    assert jwk["crv"] == "P-256"
    assert jwk["use"] == "sig"
    assert jwk["alg"] == "ES256"
    assert "d" not in jwk


def test_token_for_another_audience_or_another_key_is_rejected() -> None:
    key = SigningKey.generate()
    token = key.sign_delivery(
        issuer="https://agent.example",
        audience="https://hook.example/w",
        task_id="t",
        body=BODY,
        jti="j",
    )
    with pytest.raises(jwt.InvalidAudienceError):
        _verify(key, token, "https://other.example/w")
    other = SigningKey.generate()
    forged = other.sign_delivery(
        issuer="https://agent.example",
        audience="https://hook.example/w",
        task_id="t",
        body=BODY,
        jti="j",
    )
    keyset = jwt.PyJWKSet.from_dict(key.jwks())
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(forged, keyset.keys[0], algorithms=["ES256"], audience="https://hook.example/w")


def test_expired_token_is_rejected() -> None:
    key = SigningKey.generate()
    token = key.sign_delivery(
        issuer="https://agent.example",
        audience="a",
        task_id="t",
        body=BODY,
        jti="j",
        now=time.time() - 301,
    )
    with pytest.raises(jwt.ExpiredSignatureError):
        _verify(key, token, "a")


def _pem(private: object) -> str:
    return private.private_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.mark.parametrize(
    ("private", "alg"),
    [
        (ec.generate_private_key(ec.SECP256R1()), "ES256"),
        (ec.generate_private_key(ec.SECP384R1()), "ES384"),
        (rsa.generate_private_key(public_exponent=65537, key_size=2048), "RS256"),
        (ed25519.Ed25519PrivateKey.generate(), "EdDSA"),
    ],
)
def test_pem_keys_pick_their_algorithm_and_round_trip(private: object, alg: str) -> None:
    key = SigningKey.from_pem(_pem(private))
    assert key.algorithm == alg
    again = SigningKey.from_pem(key.to_pem())
    assert again.kid == key.kid
    token = key.sign_delivery(
        issuer="https://agent.example", audience="a", task_id="t", body=BODY, jti="j"
    )
    assert _verify(again, token, "a")["task_id"] == "t"


def test_unusable_pem_is_refused() -> None:
    with pytest.raises(ValueError, match="not a usable PEM private key"):
        SigningKey.from_pem("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(ValueError, match="at least 2048 bits"):
        SigningKey.from_pem(_pem(weak))
